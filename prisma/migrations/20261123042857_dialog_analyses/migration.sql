-- CreateTable
CREATE TABLE "dialog_analyses" (
    "id" UUID NOT NULL,
    "partnerId" UUID,
    "state" TEXT NOT NULL DEFAULT 'in-progress',
    "input" TEXT NOT NULL,
    "inputChars" INTEGER NOT NULL,
    "output" TEXT,
    "error" TEXT,
    "model" TEXT,
    "responseMode" TEXT,
    "generation" INTEGER NOT NULL DEFAULT 1,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "startedAt" TIMESTAMP(3),
    "finishedAt" TIMESTAMP(3),
    "expiresAt" TIMESTAMP(3),

    CONSTRAINT "dialog_analyses_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "dialog_analysis_calls" (
    "operationKey" TEXT NOT NULL,
    "analysisId" UUID NOT NULL,
    "generation" INTEGER NOT NULL,
    "seq" INTEGER NOT NULL,
    "model" TEXT NOT NULL,
    "responseMode" TEXT NOT NULL,
    "status" TEXT NOT NULL,
    "content" TEXT,
    "refusal" TEXT,
    "finishReason" TEXT,
    "valid" BOOLEAN,
    "verdict" TEXT,
    "failureKind" TEXT,
    "error" TEXT,
    "promptTokens" INTEGER,
    "completionTokens" INTEGER,
    "startedAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" TIMESTAMP(3),

    CONSTRAINT "dialog_analysis_calls_pkey" PRIMARY KEY ("operationKey")
);

-- CreateIndex
CREATE INDEX "dialog_analyses_partnerId_createdAt_idx" ON "dialog_analyses"("partnerId", "createdAt");

-- CreateIndex
CREATE INDEX "dialog_analyses_expiresAt_idx" ON "dialog_analyses"("expiresAt");

-- CreateIndex
CREATE UNIQUE INDEX "dialog_analysis_calls_analysisId_generation_seq_key" ON "dialog_analysis_calls"("analysisId", "generation", "seq");

-- AddForeignKey
ALTER TABLE "dialog_analyses" ADD CONSTRAINT "dialog_analyses_partnerId_fkey" FOREIGN KEY ("partnerId") REFERENCES "partners"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "dialog_analysis_calls" ADD CONSTRAINT "dialog_analysis_calls_analysisId_fkey" FOREIGN KEY ("analysisId") REFERENCES "dialog_analyses"("id") ON DELETE CASCADE ON UPDATE CASCADE;
