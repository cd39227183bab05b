-- CreateTable
CREATE TABLE "quota_keys" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "keyHash" TEXT NOT NULL,
    "keyPrefix" TEXT NOT NULL,
    "quotaType" TEXT NOT NULL,
    "tokenAmount" BIGINT NOT NULL,
    "tokensConsumed" BIGINT NOT NULL DEFAULT 0,
    "partnerId" UUID,
    "revokedAt" TIMESTAMP(3),
    "lastUsedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "quota_keys_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "quota_reservations" (
    "id" UUID NOT NULL,
    "quotaKeyId" UUID NOT NULL,
    "operationKey" TEXT NOT NULL,
    "endpoint" TEXT NOT NULL,
    "tokens" BIGINT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "usedTokens" BIGINT,
    "expiresAt" TIMESTAMP(3) NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "resolvedAt" TIMESTAMP(3),

    CONSTRAINT "quota_reservations_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "legacy_completions" (
    "id" UUID NOT NULL,
    "quotaKeyId" UUID NOT NULL,
    "state" TEXT NOT NULL DEFAULT 'in-progress',
    "input" JSONB NOT NULL,
    "output" JSONB,
    "error" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" TIMESTAMP(3),
    "expiresAt" TIMESTAMP(3),

    CONSTRAINT "legacy_completions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "quota_keys_keyHash_key" ON "quota_keys"("keyHash");

-- CreateIndex
CREATE UNIQUE INDEX "quota_reservations_operationKey_key" ON "quota_reservations"("operationKey");

-- CreateIndex
CREATE INDEX "quota_reservations_quotaKeyId_status_idx" ON "quota_reservations"("quotaKeyId", "status");

-- CreateIndex
CREATE INDEX "legacy_completions_expiresAt_idx" ON "legacy_completions"("expiresAt");

-- AddForeignKey
ALTER TABLE "quota_reservations" ADD CONSTRAINT "quota_reservations_quotaKeyId_fkey" FOREIGN KEY ("quotaKeyId") REFERENCES "quota_keys"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "legacy_completions" ADD CONSTRAINT "legacy_completions_quotaKeyId_fkey" FOREIGN KEY ("quotaKeyId") REFERENCES "quota_keys"("id") ON DELETE CASCADE ON UPDATE CASCADE;
