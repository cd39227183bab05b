-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "nameFromSource" BOOLEAN NOT NULL DEFAULT false;
