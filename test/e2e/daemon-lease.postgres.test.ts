// The daemon, its lease and the idle reaper end to end, on PostgreSQL (see daemon-lease.ts).
import { describeDaemonLease } from './daemon-lease';

describeDaemonLease('postgres');
