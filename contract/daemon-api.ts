// The daemon's side of the control-plane API: its typed documents and the input/enum types both sides
// use. Generated from schema.graphql + contract/documents/daemon.graphql (npm run generate).
export {
  ClaimBootstrapDocument,
  ReleaseLeaseDocument,
  RenewLeaseDocument,
  ReportAgentEventsDocument,
  ReportReloadPhaseDocument,
  ReportRuntimeStateDocument,
  ReportSandboxPortsDocument,
  ReportTelemetryDocument,
} from './generated/daemon';
export type {
  ReleaseLeaseInput,
  ReloadPhaseName,
  ReloadPhaseStatus,
  RenewLeaseInput,
  ReportReloadPhaseInput,
  ReportRuntimeStateInput,
  ReportTelemetryInput,
  RuntimeState,
  TelemetryReason,
  TypedDocumentString,
} from './generated/daemon';
