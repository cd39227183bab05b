-- CreateTable
CREATE TABLE "audio_uploads" (
    "id" UUID NOT NULL,
    "partnerId" UUID,
    "audioKind" TEXT NOT NULL,
    "sizeBytes" INTEGER NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expiresAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "audio_uploads_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "audio_uploads_expiresAt_idx" ON "audio_uploads"("expiresAt");

-- AddForeignKey
ALTER TABLE "audio_uploads" ADD CONSTRAINT "audio_uploads_partnerId_fkey" FOREIGN KEY ("partnerId") REFERENCES "partners"("id") ON DELETE CASCADE ON UPDATE CASCADE;
