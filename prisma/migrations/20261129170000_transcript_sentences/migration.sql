-- AlterTable
ALTER TABLE "transcripts" ADD COLUMN     "sentences" JSONB;
