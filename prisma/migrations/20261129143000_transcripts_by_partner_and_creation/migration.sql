-- CreateIndex
CREATE INDEX "transcripts_partnerId_createdAt_idx" ON "transcripts"("partnerId", "createdAt");
