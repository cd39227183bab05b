import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { client, eventually } from '../support/system.js';
import { newKnowledgeBase } from '../support/fixtures.js';
import { registerTestServers, testStack } from '../support/stack.js';
import { pdf } from '../support/samples.js';
import { binaries, dropDatabase } from '../../scripts/stack.js';
import { freeClusterPorts, startCluster, weaviateReplicationFactor, type Cluster } from '../../scripts/cluster.js';
import { loadConfig } from '../../lib/platform/config.js';
import { S3FileStorage } from '../../lib/providers/object-storage.js';
import { documentFiles } from '../../lib/platform/storage.js';
import { documentWorkflowId } from '../../lib/contracts/document-pipeline.js';
import { searchAttributeDeclarations } from '../../lib/contracts/search-attributes.js';

const run = promisify(execFile);

/**
 * The cluster profile (scripts/cluster.ts, `scripts/start --cluster`) as a multi-host deployment
 * runs it: the Temporal server on PostgreSQL with SQL visibility, 3 Weaviate nodes, the S3 object
 * store, two APIs behind HAProxy and two workers, on free ports with databases of their own. The
 * fault run (`npm run faults:cluster`, bench/RESULTS.md) kills its members under load; this checks
 * in every test run that it starts, serves, and takes the operator guide's commands unchanged.
 */
describe('the cluster profile: Temporal server on PostgreSQL, replicated Weaviate, S3, two APIs and two workers', function () {
  this.timeout(300_000);
  let cluster: Cluster;
  let http: ReturnType<typeof client>;
  const databases = () => [`${testStack().databaseUrl}_cluster`, `${testStack().databaseUrl}_cluster_temporal`, `${testStack().databaseUrl}_cluster_temporal_visibility`];
  /** The exact operator commands of docs/operations.md, with the Temporal CLI, against the cluster's server. */
  const temporalCli = (...args: string[]) => run(binaries.temporal, [...args, '--address', cluster.temporalAddress]);

  before(async function () {
    this.timeout(300_000);
    for (const db of databases()) await dropDatabase(db);
    cluster = await startCluster({
      dataDir: path.join(testStack().workDir, 'cluster'),
      databaseUrl: databases()[0]!,
      ports: await freeClusterPorts(),
      adminApiKey: testStack().adminApiKey,
      s3: { accessKey: 'clustertest', secretKey: crypto.randomBytes(16).toString('hex'), bucket: 'dwb' },
      workflowBundlePath: testStack().workflowBundlePath,
      env: { LOG_LEVEL: 'warn' },
    });
    registerTestServers([...cluster.members.values()].map((m) => m.process.child.pid!));
    http = client(cluster.apiUrl);
  });
  after(async () => {
    await cluster?.stop();
    for (const db of databases()) await dropDatabase(db).catch(() => undefined);
  });

  it('a document uploaded through the load balancer is kept in the object store, embedded into every Weaviate node, and found', async () => {
    const { partner, kb, folder } = await newKnowledgeBase(http);
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'owls.txt', content: 'Barn owls hunt voles at night over open meadows.' } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const id = created.body.id as string;
    const done = await eventually('the document to be embedded', async () => {
      const d = (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body;
      return d.embedding_status === 'success' ? d : null;
    }, 120_000);
    assert.equal(done.embedding_chunk_count, 1);

    // The original and the final content are objects of the S3 store (no API or worker has them on disk).
    const storage = new S3FileStorage(loadConfig({ ...cluster.env, STORAGE_DIR: path.join(testStack().workDir, 'cluster-check') }).objectStore!);
    assert.equal(await storage.exists(documentFiles.original(id, 'txt')), true);
    assert.match(await storage.readText(documentFiles.rewritten(id)), /Barn owls hunt voles/);

    // The chunk class is replicated on all three nodes, and each node holds the chunk (replicas
    // that missed a write catch up in the background; QUORUM writes reach two at once).
    for (const node of cluster.weaviateNodeUrls) {
      const schema = (await (await fetch(`${node}/v1/schema`)).json()) as { classes: Array<{ class: string; replicationConfig: { factor: number } }> };
      const chunks = schema.classes.filter((c) => c.class.startsWith('Chunk_'));
      assert.equal(chunks.length, 1, node);
      assert.equal(chunks[0]!.replicationConfig.factor, weaviateReplicationFactor, node);
      await eventually(`the chunk on ${node}`, async () => {
        const res = await fetch(`${node}/v1/objects?class=${chunks[0]!.class}&limit=100&consistency_level=ONE`);
        const body = (await res.json()) as { objects: Array<{ properties: { documentId: string } }> };
        return body.objects.some((o) => o.properties.documentId === id);
      }, 120_000);
    }

    const found = await http('POST', '/api/rag-test/search', { key: partner.key, json: { partner: partner.name, kb, user_message: 'owls hunting voles' } });
    assert.equal(found.status, 200, JSON.stringify(found.body));
    assert.equal(JSON.stringify(found.body).includes(id), true, JSON.stringify(found.body).slice(0, 500));
  });

  it("the operator guide's commands work unchanged: search attributes, listing by them, pause, retry and resume", async () => {
    const { stdout: attributes } = await temporalCli('operator', 'search-attribute', 'list', '--namespace', 'default');
    for (const declaration of searchAttributeDeclarations) assert.match(attributes, new RegExp(declaration.split('=')[0]!));

    const { partner, kb, folder } = await newKnowledgeBase(http);
    // A valid PDF without any text: accepted, but its digitization fails and waits for a retry.
    const created = await http('POST', `/api/documents/${partner.name}/${kb}`, {
      key: partner.key,
      form: { type: 'file', folder, use_original_as_rewritten: 'true', file: { name: 'menu.pdf', content: pdf([]) } },
    });
    assert.equal(created.status, 201);
    const id = created.body.id as string;
    const read = async () => (await http('GET', `/api/document/${partner.name}/${kb}/${id}`, { key: partner.key })).body;
    await eventually('the failure to be recorded', async () => (await read()).processing_error, 120_000);
    // SQL visibility answers the operator's query, and the Web UI's server lists the same run.
    await eventually('the failed run listed by search attribute', async () => {
      const { stdout } = await temporalCli('workflow', 'list', '--query', `DocumentId="${id}" AND PipelineStatus="failed"`);
      return stdout.includes(documentWorkflowId(id));
    });
    const ui = await fetch(`${cluster.temporalUiUrl}/api/v1/namespaces/default/workflows?query=${encodeURIComponent(`DocumentId="${id}"`)}`);
    assert.equal(ui.status, 200);
    assert.match(await ui.text(), new RegExp(documentWorkflowId(id)));

    // The operator fixes the cause in the object store, then pauses, retries and resumes.
    const storage = new S3FileStorage(loadConfig({ ...cluster.env, STORAGE_DIR: path.join(testStack().workDir, 'cluster-check') }).objectStore!);
    await storage.write(documentFiles.original(id, 'pdf'), pdf(['Cafe creme brulee, served warm.']));
    await temporalCli('workflow', 'signal', '--workflow-id', documentWorkflowId(id), '--name', 'pause');
    await temporalCli('workflow', 'signal', '--workflow-id', documentWorkflowId(id), '--name', 'retry');
    await eventually('the pipeline to hold while paused', async () => /"status":\s*"paused"/.test((await temporalCli('workflow', 'query', '--workflow-id', documentWorkflowId(id), '--type', 'progress')).stdout));
    assert.equal((await read()).embedding_status, null, 'nothing runs while paused');
    await temporalCli('workflow', 'signal', '--workflow-id', documentWorkflowId(id), '--name', 'resume');
    const done = await eventually('the document to be embedded', async () => {
      const d = await read();
      return d.embedding_status === 'success' ? d : null;
    }, 120_000);
    assert.equal(done.processing_error, null);
  });

  it('an API process killed with SIGKILL: every request through the load balancer is still answered', async () => {
    const api1 = cluster.member('api1');
    await api1.process.stop('SIGKILL');
    try {
      // HAProxy has not noticed yet (its checks run every second): a connection refused by the dead
      // process is sent to the other one, so none of these fails.
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) statuses.push((await fetch(`${cluster.apiUrl}/health`)).status);
      assert.deepEqual(statuses, Array(30).fill(200));
    } finally {
      await api1.start();
    }
    await eventually('the replica to serve again', async () => (await fetch(`http://127.0.0.1:${cluster.ports.apiReplicas[0]}/health`)).ok);
  });
});
