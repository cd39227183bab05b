-- AlterTable
ALTER TABLE "transcripts" ADD COLUMN     "webhookAuthHeaderName" TEXT,
ADD COLUMN     "webhookAuthHeaderValue" TEXT,
ADD COLUMN     "webhookStatusCode" INTEGER,
ADD COLUMN     "webhookUrl" TEXT;
