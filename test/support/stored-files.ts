import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { testStack } from './stack.js';

/**
 * What the system under test has stored, read from the test stack's object store (where systemEnv
 * puts every stored file): FileStorage answers for one key, these list what is under a prefix.
 */
let client: S3Client | null = null;
let clientOf: string | null = null;

function objectStore() {
  const { objectStore } = testStack();
  if (!client || clientOf !== objectStore.endpoint) {
    client = new S3Client({ endpoint: objectStore.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: objectStore.accessKey, secretAccessKey: objectStore.secretKey } });
    clientOf = objectStore.endpoint;
  }
  return { client, bucket: objectStore.bucket, root: objectStore.prefix };
}

/** The storage keys under `prefix/` ("documents/<id>"), each relative to `prefix/`. */
export async function storedKeys(prefix: string): Promise<string[]> {
  const { client: s3, bucket, root } = objectStore();
  const under = `${root}/${prefix.replace(/\/$/, '')}/`;
  const keys: string[] = [];
  let ContinuationToken: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: under, ...(ContinuationToken ? { ContinuationToken } : {}) }));
    for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key.slice(under.length));
    ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (ContinuationToken);
  return keys;
}

/** Like readdir: the names of the files and folders directly under `prefix/` (none when nothing is stored there). */
export async function storedNames(prefix: string): Promise<string[]> {
  return [...new Set((await storedKeys(prefix)).map((key) => key.split('/')[0]!))];
}

/** Whether anything is stored under `prefix/`. */
export async function anythingStored(prefix: string): Promise<boolean> {
  return (await storedKeys(prefix)).length > 0;
}
