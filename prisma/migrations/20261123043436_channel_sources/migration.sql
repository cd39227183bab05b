-- AlterTable
ALTER TABLE "documents" ADD COLUMN     "videoId" TEXT;

-- CreateTable
CREATE TABLE "channel_sources" (
    "id" UUID NOT NULL,
    "knowledgeBaseId" UUID NOT NULL,
    "folderId" UUID NOT NULL,
    "channelUrl" TEXT NOT NULL,
    "aliasKind" TEXT NOT NULL,
    "aliasKey" TEXT NOT NULL,
    "channelId" TEXT,
    "claimedChannelId" TEXT,
    "channelTitle" TEXT,
    "uploadsPlaylistId" TEXT,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "modelTier" TEXT NOT NULL DEFAULT 'standard',
    "status" TEXT NOT NULL DEFAULT 'pending',
    "lastOutcome" TEXT,
    "lastError" TEXT,
    "lastErrorCode" TEXT,
    "duplicateOfId" UUID,
    "lastSyncAt" TIMESTAMP(3),
    "nextSyncAt" TIMESTAMP(3),
    "scanStartedAt" TIMESTAMP(3),
    "scanCursor" TEXT,
    "discoveryDone" BOOLEAN NOT NULL DEFAULT false,
    "failures" INTEGER NOT NULL DEFAULT 0,
    "quotaUnitsTotal" BIGINT NOT NULL DEFAULT 0,
    "deletionRequestedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "channel_sources_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "channel_videos" (
    "id" UUID NOT NULL,
    "sourceId" UUID NOT NULL,
    "videoId" TEXT NOT NULL,
    "title" TEXT,
    "publishedAt" TIMESTAMP(3),
    "status" TEXT NOT NULL,
    "liveState" TEXT,
    "durationSeconds" INTEGER,
    "documentId" UUID,
    "duplicateDocumentId" UUID,
    "pipelineStartedAt" TIMESTAMP(3),
    "importedAt" TIMESTAMP(3),
    "suppressedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "channel_videos_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "channel_scan_steps" (
    "operationKey" TEXT NOT NULL,
    "sourceId" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "requests" INTEGER NOT NULL DEFAULT 0,
    "done" BOOLEAN NOT NULL DEFAULT false,
    "result" JSONB,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "channel_scan_steps_pkey" PRIMARY KEY ("operationKey")
);

-- CreateIndex
CREATE UNIQUE INDEX "channel_sources_folderId_key" ON "channel_sources"("folderId");

-- CreateIndex
CREATE INDEX "channel_sources_knowledgeBaseId_status_idx" ON "channel_sources"("knowledgeBaseId", "status");

-- CreateIndex
CREATE UNIQUE INDEX "channel_sources_knowledgeBaseId_aliasKey_key" ON "channel_sources"("knowledgeBaseId", "aliasKey");

-- CreateIndex
CREATE UNIQUE INDEX "channel_sources_knowledgeBaseId_claimedChannelId_key" ON "channel_sources"("knowledgeBaseId", "claimedChannelId");

-- CreateIndex
CREATE INDEX "channel_videos_sourceId_status_publishedAt_idx" ON "channel_videos"("sourceId", "status", "publishedAt");

-- CreateIndex
CREATE INDEX "channel_videos_documentId_idx" ON "channel_videos"("documentId");

-- CreateIndex
CREATE INDEX "channel_videos_duplicateDocumentId_idx" ON "channel_videos"("duplicateDocumentId");

-- CreateIndex
CREATE UNIQUE INDEX "channel_videos_sourceId_videoId_key" ON "channel_videos"("sourceId", "videoId");

-- CreateIndex
CREATE INDEX "channel_scan_steps_sourceId_createdAt_idx" ON "channel_scan_steps"("sourceId", "createdAt");

-- CreateIndex
CREATE INDEX "documents_knowledgeBaseId_videoId_idx" ON "documents"("knowledgeBaseId", "videoId");

-- AddForeignKey
ALTER TABLE "channel_sources" ADD CONSTRAINT "channel_sources_knowledgeBaseId_fkey" FOREIGN KEY ("knowledgeBaseId") REFERENCES "knowledge_bases"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "channel_sources" ADD CONSTRAINT "channel_sources_folderId_fkey" FOREIGN KEY ("folderId") REFERENCES "folders"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "channel_sources" ADD CONSTRAINT "channel_sources_duplicateOfId_fkey" FOREIGN KEY ("duplicateOfId") REFERENCES "channel_sources"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "channel_videos" ADD CONSTRAINT "channel_videos_sourceId_fkey" FOREIGN KEY ("sourceId") REFERENCES "channel_sources"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "channel_videos" ADD CONSTRAINT "channel_videos_documentId_fkey" FOREIGN KEY ("documentId") REFERENCES "documents"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "channel_videos" ADD CONSTRAINT "channel_videos_duplicateDocumentId_fkey" FOREIGN KEY ("duplicateDocumentId") REFERENCES "documents"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "channel_scan_steps" ADD CONSTRAINT "channel_scan_steps_sourceId_fkey" FOREIGN KEY ("sourceId") REFERENCES "channel_sources"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Backfill: the video of every existing video-platform URL document (as youTubeVideoId reads it).
UPDATE "documents"
SET "videoId" = substring("url" from '(?:[?&]v=|youtu\.be/|/(?:shorts|live|embed|v)/)([A-Za-z0-9_-]{6,20})')
WHERE "url" ~* '^https?://([a-z0-9-]+\.)*(youtube\.com|youtube-nocookie\.com|youtu\.be)/';
