-- Refused webhook deliveries are counted on the trigger instead of writing a run each.
ALTER TABLE "Trigger" ADD COLUMN "refusedDeliveries" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN "lastRefusedAt" TIMESTAMP(3),
ADD COLUMN "lastRefusedCode" TEXT;
