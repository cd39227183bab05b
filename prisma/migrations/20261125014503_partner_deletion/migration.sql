-- AlterTable
ALTER TABLE "partners" ADD COLUMN     "deletionRequestedAt" TIMESTAMP(3);
