// Imports every domain so its types and fields register, then builds the schema.
import { builder } from './builder';
import './errors';
import './enums';
import './accounts';
import './projects';
import './sessions';
import './sandboxes';
import './tokens';
import './daemon';
import './subscriptions';
import './usage';
import './gateway';
import './conversation';
import './change-requests';
import './triggers';
import './record';

export const schema = builder.toSchema({ sortSchema: false });
