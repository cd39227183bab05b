-- CreateTable
CREATE TABLE "voices" (
    "id" UUID NOT NULL,
    "partnerId" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "creatorName" TEXT,
    "creatorEmail" TEXT,
    "workflowId" TEXT NOT NULL,
    "originalFilename" TEXT,
    "originalUploadedName" TEXT,
    "originalContainer" TEXT,
    "originalDuration" DOUBLE PRECISION,
    "splittingStatus" TEXT NOT NULL DEFAULT 'idle',
    "splittingError" TEXT,
    "splitGeneration" INTEGER NOT NULL DEFAULT 0,
    "splitMaxSamples" INTEGER NOT NULL DEFAULT 25,
    "splitSampleDuration" INTEGER NOT NULL DEFAULT 15,
    "embeddingStatus" TEXT NOT NULL DEFAULT 'idle',
    "embeddingError" TEXT,
    "embedGeneration" INTEGER NOT NULL DEFAULT 0,
    "embeddingType" TEXT,
    "embedTtsType" TEXT,
    "embeddingUpdateStatus" TEXT,
    "embeddingUpdatedAt" TIMESTAMP(3),
    "embeddingEngine" TEXT,
    "embeddingFilesGeneration" INTEGER,
    "sampleScores" JSONB NOT NULL DEFAULT '[]',
    "builtInVoice" TEXT,
    "remoteVoiceId" TEXT,
    "gpuJobId" TEXT,
    "gpuJobGeneration" INTEGER,
    "gpuJobSubmittedAt" TIMESTAMP(3),
    "preferredSampleIndex" INTEGER,
    "nextSampleIndex" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "voices_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "voice_samples" (
    "voiceId" UUID NOT NULL,
    "index" INTEGER NOT NULL,
    "sourceStart" DOUBLE PRECISION,
    "durationSeconds" DOUBLE PRECISION NOT NULL,
    "origin" TEXT NOT NULL,
    "generation" INTEGER NOT NULL DEFAULT 0,
    "uploadedName" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "voice_samples_pkey" PRIMARY KEY ("voiceId","index")
);

-- CreateTable
CREATE TABLE "voice_test_samples" (
    "voiceId" UUID NOT NULL,
    "ttsType" TEXT NOT NULL,
    "filename" TEXT NOT NULL,
    "sampleIndex" INTEGER,
    "sentenceIndex" INTEGER NOT NULL,
    "sentence" TEXT NOT NULL,
    "generation" INTEGER NOT NULL,
    "contentType" TEXT NOT NULL,
    "durationSeconds" DOUBLE PRECISION,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "voice_test_samples_pkey" PRIMARY KEY ("voiceId","ttsType","filename")
);

-- CreateIndex
CREATE UNIQUE INDEX "voices_workflowId_key" ON "voices"("workflowId");

-- CreateIndex
CREATE UNIQUE INDEX "voices_partnerId_name_key" ON "voices"("partnerId", "name");

-- AddForeignKey
ALTER TABLE "voices" ADD CONSTRAINT "voices_partnerId_fkey" FOREIGN KEY ("partnerId") REFERENCES "partners"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "voice_samples" ADD CONSTRAINT "voice_samples_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "voices"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "voice_test_samples" ADD CONSTRAINT "voice_test_samples_voiceId_fkey" FOREIGN KEY ("voiceId") REFERENCES "voices"("id") ON DELETE CASCADE ON UPDATE CASCADE;
