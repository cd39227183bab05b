-- AlterTable
ALTER TABLE "transcripts" ADD COLUMN     "audioEndAtMs" INTEGER,
ADD COLUMN     "audioStartFromMs" INTEGER;
