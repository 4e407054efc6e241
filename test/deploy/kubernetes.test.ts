// deploy/kubernetes (R-DEP-1): every object validates against the Kubernetes API schemas (the
// kubernetes-models package's validators, generated from the API's OpenAPI document), and the
// pieces fit together: the Service, the PodDisruptionBudget and the autoscaler select the
// Deployment's pods, both Ingress sites reach the Service's port, the probes hit /readyz and
// /healthz on the container's port, the pods run non-root on a read-only root, and the ConfigMap
// and Secret hold only variables the server reads, with values it accepts.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service } from 'kubernetes-models/v1';
import { describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ENV_VARIABLES, parseEnv } from '../../server/env';

const DIR = new URL('../../deploy/kubernetes/', import.meta.url).pathname;

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1 Deployment': Deployment,
  'autoscaling/v2 HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1 Ingress': Ingress,
  'policy/v1 PodDisruptionBudget': PodDisruptionBudget,
  'v1 ConfigMap': ConfigMap,
  'v1 Secret': Secret,
  'v1 Service': Service,
};

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // biome-ignore lint/suspicious/noExplicitAny: parsed YAML, checked field by field below
  spec?: any;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
const objects: K8sObject[] = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((doc) => {
    if (doc.errors.length) throw new Error(`${file}: ${doc.errors.map(String).join('; ')}`);
    return doc.toJS() as K8sObject;
  }),
);
const one = (kind: string, name?: string): K8sObject => {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  expect(found, `${kind} ${name ?? ''}`).toHaveLength(1);
  return found[0]!;
};
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

describe('deploy/kubernetes', () => {
  test('every object validates against the Kubernetes API schema of its kind', () => {
    expect(objects.length).toBeGreaterThanOrEqual(8);
    for (const o of objects) {
      const Model = MODELS[`${o.apiVersion} ${o.kind}`];
      expect(Model, `${o.apiVersion} ${o.kind} ${o.metadata?.name}`).toBeDefined();
      expect(() => new Model!(o as never).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
    }
    // The validator catches what it should: a wrong type fails.
    const broken = structuredClone(one('Deployment'));
    broken.spec.replicas = 'two';
    expect(() => new Deployment(broken as never).validate()).toThrow(/replicas/);
  });

  test('kustomization.yaml lists every manifest', () => {
    const kustomization = parseAllDocuments(readFileSync(join(DIR, 'kustomization.yaml'), 'utf8'))[0]!.toJS();
    expect([...kustomization.resources].sort()).toEqual([...files].sort());
  });

  test('the Deployment: at least two replicas, probes on /readyz and /healthz, resources, non-root on a read-only root', () => {
    const deployment = one('Deployment');
    const pod = deployment.spec.template;
    expect(deployment.spec.replicas).toBeGreaterThanOrEqual(2);
    expect(selects(deployment.spec.selector.matchLabels, pod.metadata.labels)).toBe(true);
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
    expect(pod.spec.containers).toHaveLength(1);
    const [server] = pod.spec.containers;
    const port = server.ports.find((p: { name: string }) => p.name === 'http');
    expect(port.containerPort).toBe(Number(one('ConfigMap').data!.PORT));
    expect(server.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 'http' });
    expect(server.livenessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(server.startupProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(server.resources.requests).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
    expect(server.resources.limits.memory).toEqual(expect.any(String));
    expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: expect.any(Number) });
    expect(pod.spec.securityContext.runAsUser).toBeGreaterThan(0);
    expect(server.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    // A read-only root: the data dir and /tmp are volumes.
    const mounts = server.volumeMounts.map((m: { mountPath: string }) => m.mountPath);
    expect(mounts).toEqual(expect.arrayContaining([one('ConfigMap').data!.SINGULACOMP_DATA_DIR, '/tmp']));
    // The shutdown grace fits in the pod's termination grace, after the preStop pause.
    const graceMs = Number(one('ConfigMap').data!.SINGULACOMP_SHUTDOWN_GRACE_MS);
    expect(server.lifecycle.preStop.sleep.seconds * 1000 + graceMs).toBeLessThan(
      pod.spec.terminationGracePeriodSeconds * 1000,
    );
    // Its configuration comes from the ConfigMap and the Secret in this directory.
    const sources = server.envFrom.map(
      (e: { configMapRef?: { name: string }; secretRef?: { name: string } }) =>
        e.configMapRef ? `ConfigMap ${e.configMapRef.name}` : `Secret ${e.secretRef?.name}`,
    );
    expect(sources.sort()).toEqual([
      `ConfigMap ${one('ConfigMap').metadata.name}`,
      `Secret ${one('Secret').metadata.name}`,
    ]);
  });

  test('the Service, the PodDisruptionBudget and the autoscaler select the Deployment and its pods', () => {
    const deployment = one('Deployment');
    const labels = deployment.spec.template.metadata.labels;
    const service = one('Service');
    expect(selects(service.spec.selector, labels)).toBe(true);
    expect(service.spec.ports).toEqual([expect.objectContaining({ name: 'http', targetPort: 'http' })]);
    const pdb = one('PodDisruptionBudget');
    expect(selects(pdb.spec.selector.matchLabels, labels)).toBe(true);
    expect(pdb.spec.minAvailable).toBeLessThan(deployment.spec.replicas);
    const hpa = one('HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: deployment.metadata.name,
    });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
  });

  test('the API and the previews are two Ingress sites, the preview one on the wildcard of SINGULACOMP_PREVIEW_DOMAIN, both to the Service', () => {
    const config = one('ConfigMap').data!;
    const service = one('Service');
    const api = one('Ingress', 'singulacomp-api');
    const preview = one('Ingress', 'singulacomp-preview');
    expect(api.spec.rules.map((r: { host: string }) => r.host)).toEqual([
      new URL(config.SINGULACOMP_PUBLIC_URL!).host,
    ]);
    expect(preview.spec.rules.map((r: { host: string }) => r.host)).toEqual([
      `*.${config.SINGULACOMP_PREVIEW_DOMAIN}`,
    ]);
    for (const ingress of [api, preview]) {
      expect(ingress.spec.tls[0].hosts).toEqual(ingress.spec.rules.map((r: { host: string }) => r.host));
      for (const rule of ingress.spec.rules) {
        for (const path of rule.http.paths) {
          expect(path.backend.service).toEqual({ name: service.metadata.name, port: { name: 'http' } });
        }
      }
      // Subscriptions stay open for an hour.
      expect(
        Number(ingress.metadata.annotations?.['nginx.ingress.kubernetes.io/proxy-read-timeout']),
      ).toBeGreaterThanOrEqual(3600);
    }
    // Distinct certificates: the preview site is not the API's origin.
    expect(api.spec.tls[0].secretName).not.toBe(preview.spec.tls[0].secretName);
  });

  test('the ConfigMap and the Secret hold only variables the server reads, with values it accepts', () => {
    const config = one('ConfigMap').data!;
    const secret = one('Secret').stringData!;
    for (const name of [...Object.keys(config), ...Object.keys(secret)])
      expect(ENV_VARIABLES).toContain(name);
    expect(Object.keys(config).filter((k) => k in secret)).toEqual([]);
    expect(Object.keys(secret)).toEqual(
      expect.arrayContaining(['SINGULACOMP_SECRET_KEY', 'DATABASE_URL', 'REDIS_URL']),
    );
    const env = parseEnv({ ...config, ...secret });
    expect(env.nodeEnv).toBe('production');
    expect(env.databaseUrl).toMatch(/^postgresql:/);
    expect(env.previewDomain).toBe(config.SINGULACOMP_PREVIEW_DOMAIN);
  });
});
