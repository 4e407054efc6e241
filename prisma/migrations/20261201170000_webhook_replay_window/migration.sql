-- Webhook replay protection bounded to a timestamp window: deliveries are signed over
-- "<timestamp>.<body>" and accepted within the window, so an accepted delivery's signature only
-- needs remembering while its signed time is inside it. The signatures move from a unique index on
-- every run (kept forever) to a table of their own that the server prunes.

-- DropIndex
DROP INDEX "TriggerRun_triggerId_signature_key";

-- AlterTable
ALTER TABLE "TriggerRun" DROP COLUMN "signature";

-- CreateTable
CREATE TABLE "TriggerWebhookDelivery" (
    "triggerId" UUID NOT NULL,
    "signature" TEXT NOT NULL,
    "signedAt" TIMESTAMP(3) NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "TriggerWebhookDelivery_pkey" PRIMARY KEY ("triggerId","signature")
);

-- CreateIndex
CREATE INDEX "TriggerWebhookDelivery_signedAt_idx" ON "TriggerWebhookDelivery"("signedAt");

-- AddForeignKey
ALTER TABLE "TriggerWebhookDelivery" ADD CONSTRAINT "TriggerWebhookDelivery_triggerId_fkey" FOREIGN KEY ("triggerId") REFERENCES "Trigger"("id") ON DELETE CASCADE ON UPDATE CASCADE;
