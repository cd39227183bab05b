-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "embeddingManifest" JSONB,
ADD COLUMN     "embeddingProfileId" INTEGER,
ADD COLUMN     "vendorFileId" TEXT,
ADD COLUMN     "vendorSyncError" TEXT,
ADD COLUMN     "vendorSyncStatus" TEXT,
ADD COLUMN     "vendorSyncedAt" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "knowledge_bases" ADD COLUMN     "embeddingLastError" TEXT,
ADD COLUMN     "embeddingLastUpdateAt" TIMESTAMP(3),
ADD COLUMN     "embeddingLastUpdateStatus" TEXT,
ADD COLUMN     "embeddingProfileId" INTEGER,
ADD COLUMN     "vendorVectorStoreId" TEXT;

-- CreateTable
CREATE TABLE "embedding_profiles" (
    "id" SERIAL NOT NULL,
    "name" TEXT NOT NULL,
    "provider" TEXT NOT NULL,
    "model" TEXT NOT NULL,
    "dimensions" INTEGER NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "embedding_profiles_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "embedding_profiles_name_key" ON "embedding_profiles"("name");

-- AddForeignKey
ALTER TABLE "knowledge_bases" ADD CONSTRAINT "knowledge_bases_embeddingProfileId_fkey" FOREIGN KEY ("embeddingProfileId") REFERENCES "embedding_profiles"("id") ON DELETE SET NULL ON UPDATE CASCADE;
