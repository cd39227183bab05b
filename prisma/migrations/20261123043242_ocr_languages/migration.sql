-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "ocrLanguages" TEXT[] DEFAULT ARRAY[]::TEXT[];

-- AlterTable
ALTER TABLE "knowledge_bases" ADD COLUMN     "ocrLanguages" TEXT[] DEFAULT ARRAY[]::TEXT[];
