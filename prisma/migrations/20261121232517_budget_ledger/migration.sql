-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "acceptedCharacters" INTEGER NOT NULL DEFAULT 0;

-- AlterTable
ALTER TABLE "knowledge_bases" ADD COLUMN     "charactersConsumed" BIGINT NOT NULL DEFAULT 0,
ADD COLUMN     "dollarsConsumed" DECIMAL(30,8) NOT NULL DEFAULT 0,
ADD COLUMN     "tokensConsumed" BIGINT NOT NULL DEFAULT 0;

-- CreateTable
CREATE TABLE "budget_reservations" (
    "id" UUID NOT NULL,
    "knowledgeBaseId" UUID NOT NULL,
    "operationKey" TEXT NOT NULL,
    "workflowId" TEXT NOT NULL,
    "documentId" UUID,
    "category" TEXT NOT NULL,
    "characters" BIGINT NOT NULL DEFAULT 0,
    "tokens" BIGINT NOT NULL DEFAULT 0,
    "dollars" DECIMAL(30,8) NOT NULL DEFAULT 0,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "note" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "resolvedAt" TIMESTAMP(3),

    CONSTRAINT "budget_reservations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "usage_events" (
    "id" UUID NOT NULL,
    "knowledgeBaseId" UUID NOT NULL,
    "documentId" UUID,
    "operationKey" TEXT NOT NULL,
    "category" TEXT NOT NULL,
    "model" TEXT,
    "fallback" BOOLEAN NOT NULL DEFAULT false,
    "rejected" BOOLEAN NOT NULL DEFAULT false,
    "characters" BIGINT NOT NULL DEFAULT 0,
    "inputTokens" BIGINT,
    "outputTokens" BIGINT,
    "costUsd" DECIMAL(30,8),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "usage_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "budget_reservations_operationKey_key" ON "budget_reservations"("operationKey");

-- CreateIndex
CREATE INDEX "budget_reservations_knowledgeBaseId_status_idx" ON "budget_reservations"("knowledgeBaseId", "status");

-- CreateIndex
CREATE INDEX "budget_reservations_status_createdAt_idx" ON "budget_reservations"("status", "createdAt");

-- CreateIndex
CREATE UNIQUE INDEX "usage_events_operationKey_key" ON "usage_events"("operationKey");

-- CreateIndex
CREATE INDEX "usage_events_knowledgeBaseId_category_idx" ON "usage_events"("knowledgeBaseId", "category");

-- CreateIndex
CREATE INDEX "usage_events_documentId_idx" ON "usage_events"("documentId");

-- AddForeignKey
ALTER TABLE "budget_reservations" ADD CONSTRAINT "budget_reservations_knowledgeBaseId_fkey" FOREIGN KEY ("knowledgeBaseId") REFERENCES "knowledge_bases"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "usage_events" ADD CONSTRAINT "usage_events_knowledgeBaseId_fkey" FOREIGN KEY ("knowledgeBaseId") REFERENCES "knowledge_bases"("id") ON DELETE CASCADE ON UPDATE CASCADE;
