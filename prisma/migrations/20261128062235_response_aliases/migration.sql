-- CreateTable
CREATE TABLE "response_aliases" (
    "serviceResponseId" TEXT NOT NULL,
    "providerResponseId" TEXT NOT NULL,
    "quotaKeyId" UUID NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "response_aliases_pkey" PRIMARY KEY ("serviceResponseId")
);

-- CreateIndex
CREATE INDEX "response_aliases_createdAt_idx" ON "response_aliases"("createdAt");

-- AddForeignKey
ALTER TABLE "response_aliases" ADD CONSTRAINT "response_aliases_quotaKeyId_fkey" FOREIGN KEY ("quotaKeyId") REFERENCES "quota_keys"("id") ON DELETE CASCADE ON UPDATE CASCADE;
