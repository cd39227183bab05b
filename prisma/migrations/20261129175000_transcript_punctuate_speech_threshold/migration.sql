-- AlterTable
ALTER TABLE "transcripts" ADD COLUMN     "punctuate" BOOLEAN NOT NULL DEFAULT true,
ADD COLUMN     "speechThreshold" DOUBLE PRECISION;
