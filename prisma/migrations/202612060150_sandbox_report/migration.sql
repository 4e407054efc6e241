-- Ports and the kept log tail move off the Sandbox row: a page of sessions reads whole sandbox rows,
-- and a 64 KiB log tail in each of them would be read with every page.
ALTER TABLE "Sandbox" DROP COLUMN "ports";
ALTER TABLE "Sandbox" DROP COLUMN "portsReportedAt";
ALTER TABLE "Sandbox" DROP COLUMN "logTail";

CREATE TABLE "SandboxReport" (
    "sandboxId" UUID NOT NULL,
    "ports" INTEGER[] DEFAULT ARRAY[]::INTEGER[],
    "portsReportedAt" TIMESTAMP(3),
    "logTail" TEXT,
    "logTailAt" TIMESTAMP(3),
    CONSTRAINT "SandboxReport_pkey" PRIMARY KEY ("sandboxId")
);
ALTER TABLE "SandboxReport" ADD CONSTRAINT "SandboxReport_sandboxId_fkey"
  FOREIGN KEY ("sandboxId") REFERENCES "Sandbox"("id") ON DELETE CASCADE ON UPDATE CASCADE;
