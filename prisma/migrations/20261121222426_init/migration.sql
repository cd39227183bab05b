-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateTable
CREATE TABLE "partners" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "keyHash" TEXT NOT NULL,
    "maxDocuments" INTEGER NOT NULL DEFAULT 100000000,
    "allowAudioVideo" BOOLEAN NOT NULL DEFAULT true,
    "vendorSyncEnabled" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "partners_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "knowledge_bases" (
    "id" UUID NOT NULL,
    "partnerId" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "expertName" TEXT,
    "userEmail" TEXT,
    "characterLimit" BIGINT,
    "tokenLimit" BIGINT,
    "dollarLimitUsd" DECIMAL(30,8),
    "embeddingStatus" TEXT NOT NULL DEFAULT 'none',
    "deletionRequestedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "knowledge_bases_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "folders" (
    "id" UUID NOT NULL,
    "knowledgeBaseId" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "type" TEXT NOT NULL DEFAULT 'regular',
    "deletionRequestedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "folders_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "documents" (
    "id" UUID NOT NULL,
    "knowledgeBaseId" UUID NOT NULL,
    "folderId" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "url" TEXT,
    "originalExtension" TEXT,
    "fileOriginal" TEXT,
    "fileDigitized" TEXT,
    "fileRewrittenDraft" TEXT,
    "fileRewritten" TEXT,
    "userEmail" TEXT,
    "expertName" TEXT,
    "autoRewrite" BOOLEAN NOT NULL DEFAULT false,
    "useOriginalAsRewritten" BOOLEAN NOT NULL DEFAULT false,
    "modelTier" TEXT NOT NULL DEFAULT 'standard',
    "inQueues" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "digitizationProvider" TEXT,
    "digitizationCostUsd" DECIMAL(30,8),
    "rewriteModel" TEXT,
    "rewriteProvider" TEXT,
    "rewriteProviderInferred" BOOLEAN,
    "inputFileTokens" INTEGER,
    "rewriteInputTokensTotal" INTEGER,
    "rewriteInputTokensPasses" JSONB NOT NULL DEFAULT '[]',
    "rewriteOutputTokens" INTEGER,
    "rewriteCostUsd" DECIMAL(30,8),
    "rewriteCompletedAt" TIMESTAMP(3),
    "processingError" TEXT,
    "embeddingStatus" TEXT,
    "embeddingError" TEXT,
    "embeddedAt" TIMESTAMP(3),
    "embeddingChunkCount" INTEGER,
    "embeddingDenseVectorCount" INTEGER,
    "embeddingBm25LanguageCounts" JSONB,
    "vectorstoreDocumentId" TEXT,
    "deletionRequestedAt" TIMESTAMP(3),
    "digitizedCharCount" INTEGER,
    "draftRewriteCharCount" INTEGER,
    "finalRewriteCharCount" INTEGER,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "documents_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "partners_name_key" ON "partners"("name");

-- CreateIndex
CREATE UNIQUE INDEX "partners_keyHash_key" ON "partners"("keyHash");

-- CreateIndex
CREATE UNIQUE INDEX "knowledge_bases_partnerId_name_key" ON "knowledge_bases"("partnerId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "folders_knowledgeBaseId_name_key" ON "folders"("knowledgeBaseId", "name");

-- CreateIndex
CREATE INDEX "documents_knowledgeBaseId_idx" ON "documents"("knowledgeBaseId");

-- CreateIndex
CREATE INDEX "documents_folderId_idx" ON "documents"("folderId");

-- AddForeignKey
ALTER TABLE "knowledge_bases" ADD CONSTRAINT "knowledge_bases_partnerId_fkey" FOREIGN KEY ("partnerId") REFERENCES "partners"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "folders" ADD CONSTRAINT "folders_knowledgeBaseId_fkey" FOREIGN KEY ("knowledgeBaseId") REFERENCES "knowledge_bases"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "documents" ADD CONSTRAINT "documents_knowledgeBaseId_fkey" FOREIGN KEY ("knowledgeBaseId") REFERENCES "knowledge_bases"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "documents" ADD CONSTRAINT "documents_folderId_fkey" FOREIGN KEY ("folderId") REFERENCES "folders"("id") ON DELETE CASCADE ON UPDATE CASCADE;
