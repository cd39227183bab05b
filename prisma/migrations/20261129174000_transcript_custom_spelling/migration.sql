-- AlterTable
ALTER TABLE "transcripts" ADD COLUMN     "customSpelling" JSONB;
