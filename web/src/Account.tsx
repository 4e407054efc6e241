// The account: members, tokens (a new token's secret is shown once, here, and never again) and the
// metered usage of the last 30 days (billed only on TEAM; other tiers see the cost for reference).
// A token is revoked after a confirmation; revoked tokens stay listed, marked revoked.
import { useMemo, useState } from 'react';
import { useMutation, useQuery } from 'urql';
import { ConfirmButton } from './Confirm';
import { DataTable } from './DataTable';
import { Problem, problemFromError, useMutationProblem } from './errors';
import {
  AccountPageDocument,
  CreatePersonalAccessTokenDocument,
  RevokeTokenDocument,
} from './generated/graphql';
import { ShownOnce } from './ShownOnce';
import { formatUsd } from './status';

const DAY_MS = 86_400_000;

export function Account() {
  const range = useMemo(() => {
    const to = new Date(Math.ceil(Date.now() / DAY_MS) * DAY_MS);
    return { from: new Date(to.getTime() - 30 * DAY_MS).toISOString(), to: to.toISOString() };
  }, []);
  const [page, refetch] = useQuery({ query: AccountPageDocument, variables: range });
  if (page.error) return <Problem problem={problemFromError(page.error)} />;
  const data = page.data;
  if (!data) return <p aria-busy="true">Loading…</p>;
  const { account } = data.viewer;
  const usage = data.accountUsage;
  return (
    <>
      <section className="card" aria-labelledby="account-title">
        <h1 id="account-title">{account.name}</h1>
        <p>
          {account.tier} · {account.liveSessionCount} live session(s) of {account.concurrentSessionLimit}{' '}
          allowed
        </p>
      </section>
      <section className="card" aria-labelledby="usage-title" data-testid="usage">
        <h2 id="usage-title">Usage, last 30 days</h2>
        <p>
          {Math.round(usage.seconds / 60)} sandbox minutes, cost {formatUsd(usage.costUsd)}.{' '}
          {usage.billable
            ? `Billed: ${formatUsd(usage.billedUsd)}.`
            : `Not billed: only TEAM accounts are billed, and this one is ${usage.tier}.`}
        </p>
        {usage.providers.length > 0 && (
          <DataTable
            label="Usage by provider"
            columns={['Provider', 'Sandboxes', 'Minutes', 'Cost']}
            rows={usage.providers}
            rowKey={(p) => p.provider}
            cells={(p) => (
              <>
                <td>{p.provider}</td>
                <td>{p.sandboxCount}</td>
                <td>{Math.round(p.seconds / 60)}</td>
                <td>{formatUsd(p.costUsd)}</td>
              </>
            )}
          />
        )}
      </section>
      <section className="card" aria-labelledby="members-title">
        <h2 id="members-title">Members</h2>
        <ul data-testid="members">
          {account.members.map((m) => (
            <li key={m.id}>
              {m.name} &lt;{m.email}&gt; · {m.role.toLowerCase()}
            </li>
          ))}
        </ul>
      </section>
      <Tokens
        scopes={data.viewer.scopes}
        tokens={data.viewer.tokens.edges.map((edge) => edge.node)}
        onChanged={() => refetch({ requestPolicy: 'network-only' })}
      />
    </>
  );
}

interface TokenRow {
  id: string;
  name: string;
  kind: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  lastUsedAt?: string | null;
  revokedAt?: string | null;
}

function Tokens({ scopes, tokens, onChanged }: { scopes: string[]; tokens: TokenRow[]; onChanged(): void }) {
  const [creating, create] = useMutation(CreatePersonalAccessTokenDocument);
  const [revoking, revoke] = useMutation(RevokeTokenDocument);
  const [name, setName] = useState('');
  const [chosen, setChosen] = useState<string[]>(() => scopes.filter((s) => s.endsWith(':read')));
  const [secret, setSecret] = useState<string | null>(null);
  const { problem, settle } = useMutationProblem();

  async function submit(event: { preventDefault(): void }) {
    event.preventDefault();
    setSecret(null);
    const created = await settle(
      create({ input: { name: name.trim(), scopes: chosen } }),
      (data) => data.createPersonalAccessToken,
      'CreateTokenSuccess',
    );
    if (!created) return;
    setSecret(created.secret);
    setName('');
    onChanged();
  }

  async function onRevoke(tokenId: string) {
    const input = { tokenId };
    if (await settle(revoke({ input }), (data) => data.revokeToken, 'RevokeTokenSuccess')) onChanged();
  }

  return (
    <section className="card" aria-labelledby="tokens-title">
      <h2 id="tokens-title">Tokens</h2>
      <DataTable
        label="Tokens table"
        columns={['Name', 'Kind', 'Prefix', 'Scopes', 'Last used', 'Actions']}
        rows={tokens}
        rowKey={(t) => t.id}
        rowProps={(t) => ({ 'data-token': t.name, 'data-revoked': Boolean(t.revokedAt) })}
        cells={(t) => (
          <>
            <td>
              {t.name}
              {t.revokedAt && ' (revoked)'}
            </td>
            <td>{t.kind.toLowerCase().replace('_', ' ')}</td>
            <td className="mono">{t.prefix}</td>
            <td>{t.scopes.join(', ')}</td>
            <td>{t.lastUsedAt ? new Date(t.lastUsedAt).toLocaleString() : 'never'}</td>
            <td>
              {t.revokedAt ? (
                `revoked ${new Date(t.revokedAt).toLocaleString()}`
              ) : (
                <ConfirmButton
                  label={`Revoke ${t.name}`}
                  question={`Revoke ${t.name}? Anything using it is refused from now on.`}
                  confirmLabel="Revoke token"
                  disabled={revoking.fetching}
                  onConfirm={() => void onRevoke(t.id)}
                />
              )}
            </td>
          </>
        )}
      />
      <form className="create" onSubmit={submit}>
        <label>
          Token name
          <input name="tokenName" value={name} required onChange={(e) => setName(e.target.value)} />
        </label>
        <fieldset className="wide">
          <legend>Scopes</legend>
          {scopes.map((scope) => (
            <label key={scope} className="check">
              <input
                type="checkbox"
                checked={chosen.includes(scope)}
                onChange={(e) =>
                  setChosen((all) => (e.target.checked ? [...all, scope] : all.filter((s) => s !== scope)))
                }
              />{' '}
              {scope}
            </label>
          ))}
        </fieldset>
        <button type="submit" disabled={creating.fetching || name.trim() === ''}>
          Create token
        </button>
      </form>
      <ShownOnce what="the token" value={secret} testId="new-secret" />
      <Problem problem={problem} />
    </section>
  );
}
