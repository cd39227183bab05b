-- CreateTable
CREATE TABLE "transcripts" (
    "id" UUID NOT NULL,
    "partnerId" UUID,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "sourceKind" TEXT NOT NULL,
    "audioUrl" TEXT,
    "uploadedName" TEXT,
    "audioKind" TEXT,
    "languageCode" TEXT NOT NULL,
    "languageAuto" BOOLEAN NOT NULL DEFAULT false,
    "fillerWords" BOOLEAN NOT NULL DEFAULT false,
    "formatText" BOOLEAN NOT NULL DEFAULT true,
    "boostedWords" TEXT[],
    "engine" TEXT,
    "segmentCount" INTEGER,
    "audioDurationSeconds" INTEGER,
    "text" TEXT,
    "error" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "startedAt" TIMESTAMP(3),
    "finishedAt" TIMESTAMP(3),
    "expiresAt" TIMESTAMP(3),

    CONSTRAINT "transcripts_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "transcript_segments" (
    "transcriptId" UUID NOT NULL,
    "index" INTEGER NOT NULL,
    "startSeconds" DOUBLE PRECISION NOT NULL,
    "endSeconds" DOUBLE PRECISION NOT NULL,
    "words" JSONB,
    "text" TEXT,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "completedAt" TIMESTAMP(3),

    CONSTRAINT "transcript_segments_pkey" PRIMARY KEY ("transcriptId","index")
);

-- CreateTable
CREATE TABLE "speech_requests" (
    "id" BIGSERIAL NOT NULL,
    "quotaKeyId" UUID,
    "status" TEXT NOT NULL,
    "httpStatus" INTEGER NOT NULL,
    "voice" TEXT,
    "engine" TEXT,
    "languageRequested" TEXT,
    "languageUsed" TEXT,
    "detectedLanguage" TEXT,
    "detectionConfidence" DOUBLE PRECISION,
    "responseFormat" TEXT,
    "speed" DOUBLE PRECISION,
    "characters" INTEGER,
    "tokens" INTEGER,
    "audioBytes" INTEGER,
    "ttfbMs" INTEGER,
    "durationMs" INTEGER,
    "error" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "speech_requests_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "transcripts_partnerId_status_idx" ON "transcripts"("partnerId", "status");

-- CreateIndex
CREATE INDEX "speech_requests_createdAt_idx" ON "speech_requests"("createdAt");

-- AddForeignKey
ALTER TABLE "transcripts" ADD CONSTRAINT "transcripts_partnerId_fkey" FOREIGN KEY ("partnerId") REFERENCES "partners"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "transcript_segments" ADD CONSTRAINT "transcript_segments_transcriptId_fkey" FOREIGN KEY ("transcriptId") REFERENCES "transcripts"("id") ON DELETE CASCADE ON UPDATE CASCADE;
