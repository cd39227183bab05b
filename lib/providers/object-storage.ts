import fs from 'node:fs';
import fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { ConfigError, type ObjectStoreSettings } from '../platform/config.js';
import { MissingStoredFile, type FileStorage } from '../platform/storage.js';
import { trimEndOf } from '../platform/text.js';
import { isUnavailableStatus, ServiceUnavailable } from './service-unavailable.js';

export interface S3StorageOptions {
  /** Part size of multipart uploads (moveIn); smaller files go in one PutObject. At least 5 MiB (S3's minimum). */
  partBytes?: number;
  /** Larger copies go part by part (UploadPartCopy); at most 5 GiB, the most one CopyObject takes. */
  copyPartBytes?: number;
  /** How long verify() waits for an endpoint that does not answer before it gives up. */
  startWaitMs?: number;
}

const MiB = 1024 * 1024;
/** 8 MiB parts, two in flight: an upload holds ~24 MiB at most, and 10 GiB (MAX_UPLOAD_BYTES' bound) is 1,280 parts of S3's 10,000. */
const DEFAULT_PART_BYTES = 8 * MiB;
const UPLOAD_QUEUE = 2;
const DEFAULT_COPY_PART_BYTES = 1024 * MiB;
/**
 * At start an endpoint that does not answer is asked again for this long, so that a deploy whose
 * object store comes up a moment after the API and the workers still starts (docs/deployment.md,
 * "File storage in an object store").
 */
const START_WAIT_MS = 15_000;
/** A connection not made in this time, or a request idle this long, counts as the store unavailable. */
const CONNECT_TIMEOUT_MS = 5_000;
const IDLE_TIMEOUT_MS = 30_000;
/** Downloads stream to slow clients while other requests go on: far more than the SDK's 50 sockets. */
const MAX_SOCKETS = 256;
/** DeleteObjects takes at most this many keys, one page of ListObjectsV2. */
const DELETE_BATCH = 1000;

/** S3 error names that say the credentials, not the request, were refused (XAdminUserNotFound: Versity's unknown access key). */
const refusedCredentials = new Set(['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'AccessDenied', 'InvalidToken', 'ExpiredToken', 'InvalidClientTokenId', 'XAdminUserNotFound']);
const wrongRegion = new Set(['PermanentRedirect', 'AuthorizationHeaderMalformed', 'IllegalLocationConstraintException']);
/** Connection failures (the error's code or one of its causes'), DNS included: the store is not there right now. */
const connectionCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ERR_STREAM_PREMATURE_CLOSE']);

type S3Error = { name?: string; code?: string; message?: string; cause?: unknown; $metadata?: { httpStatusCode?: number } };

function connectionCode(err: unknown): string | null {
  let cause: unknown = err;
  for (let depth = 0; depth < 5 && cause; depth++) {
    const code = (cause as S3Error).code;
    if (code && connectionCodes.has(code)) return code;
    cause = (cause as S3Error).cause;
  }
  return null;
}

/**
 * Why a request found the object store down or overloaded (refused or broken connections, no
 * answer in time, 5xx such as 503 SlowDown, 408, 429), or null when the store answered it.
 */
function outageReason(err: unknown): string | null {
  const e = err as S3Error;
  const status = e.$metadata?.httpStatusCode;
  if (status !== undefined && isUnavailableStatus(status)) return `HTTP ${status}${e.name && e.name !== 'Unknown' ? ` ${e.name}` : ''}`;
  if (e.name === 'TimeoutError' || e.name === 'RequestTimeout') return 'no answer in time';
  return connectionCode(err);
}

const isMissingKey = (err: unknown) => (err as S3Error).name === 'NoSuchKey' || (err as S3Error).name === 'NotFound';
const errorName = (err: unknown) => {
  const e = err as S3Error;
  return `${e.name ?? 'Error'}${e.$metadata?.httpStatusCode ? ` (HTTP ${e.$metadata.httpStatusCode})` : ''}`;
};

/**
 * Stored files in an S3-compatible object store (STORAGE_URL=s3://bucket/prefix), every key under
 * the prefix. Files are streamed both ways: uploads as multipart uploads from the file, reads
 * straight from the response. An outage (see outageReason) is a ServiceUnavailable, which the
 * workflows wait out and the API answers with 503; a missing key is a MissingStoredFile; any other
 * refusal is the SDK's error as it is.
 */
export class S3FileStorage implements FileStorage {
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly partBytes: number;
  private readonly copyPartBytes: number;
  private readonly startWaitMs: number;

  constructor(
    private readonly settings: ObjectStoreSettings,
    options: S3StorageOptions = {},
  ) {
    this.bucket = settings.bucket;
    this.partBytes = Math.max(options.partBytes ?? DEFAULT_PART_BYTES, 5 * MiB);
    this.copyPartBytes = Math.min(Math.max(options.copyPartBytes ?? DEFAULT_COPY_PART_BYTES, 5 * MiB), 5 * 1024 * MiB);
    this.startWaitMs = options.startWaitMs ?? START_WAIT_MS;
    const agent = { keepAlive: true, maxSockets: MAX_SOCKETS };
    this.client = new S3Client({
      region: settings.region,
      ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
      forcePathStyle: settings.forcePathStyle,
      ...(settings.credentials ? { credentials: settings.credentials } : {}),
      requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, socketTimeout: IDLE_TIMEOUT_MS, httpAgent: agent, httpsAgent: agent },
    });
  }

  /** The object key of a storage key: under the prefix; a key must be a plain relative path. */
  private objectKey(key: string): string {
    if (!key || key.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) throw new Error(`storage key is not a plain relative path: ${JSON.stringify(key)}`);
    return this.settings.prefix ? `${this.settings.prefix}/${key}` : key;
  }

  /** `work`'s failure as the callers handle it: missing (when `key` names the file read), down, or as it is. */
  private async call<T>(key: string | null, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (key !== null && isMissingKey(err)) throw new MissingStoredFile(key);
      const reason = outageReason(err);
      if (reason) throw new ServiceUnavailable(`file storage (the object store) is unavailable: ${reason}`);
      throw err;
    }
  }

  /** Where the store is, for the start-up messages. */
  private get where(): string {
    return this.settings.endpoint ?? `AWS S3 of S3_REGION ${this.settings.region} (S3_ENDPOINT unset)`;
  }

  /**
   * One listing of at most one key under the prefix (what removePrefix needs, and proof of bucket
   * and credentials). A refusal is a ConfigError naming its setting at once; an endpoint that does
   * not answer is asked again every half second for startWaitMs.
   */
  async verify(): Promise<void> {
    const deadline = Date.now() + this.startWaitMs;
    for (;;) {
      try {
        await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, MaxKeys: 1, ...(this.settings.prefix ? { Prefix: `${this.settings.prefix}/` } : {}) }));
        return;
      } catch (err) {
        const reason = outageReason(err);
        if (!reason) throw this.startRefusal(err);
        if (Date.now() >= deadline) throw new ConfigError(`S3_ENDPOINT ${this.where} could not be reached for ${Math.round(this.startWaitMs / 1000)} s (${reason})`);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  private startRefusal(err: unknown): ConfigError {
    const e = err as S3Error;
    const status = e.$metadata?.httpStatusCode;
    if (e.name === 'NoSuchBucket') return new ConfigError(`STORAGE_URL names bucket ${JSON.stringify(this.bucket)}, which does not exist at ${this.where}: create it, or name another`);
    if (e.name === 'CredentialsProviderError') {
      return new ConfigError('AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY are not set and the AWS SDK found no other credentials (profile, web identity, instance role) for STORAGE_URL');
    }
    if (refusedCredentials.has(e.name ?? '') || status === 401 || status === 403) {
      const whose = this.settings.credentials ? `AWS_ACCESS_KEY_ID ${this.settings.credentials.accessKeyId} / AWS_SECRET_ACCESS_KEY` : "the AWS SDK's default credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY unset)";
      return new ConfigError(`${whose} were refused by the object store at ${this.where} (${errorName(err)}): wrong or expired credentials, or not allowed to list bucket ${JSON.stringify(this.bucket)}`);
    }
    if (wrongRegion.has(e.name ?? '') || status === 301) return new ConfigError(`S3_REGION ${this.settings.region} is not the region of bucket ${JSON.stringify(this.bucket)} at ${this.where} (${errorName(err)})`);
    return new ConfigError(`STORAGE_URL ${this.settings.url}: the object store at ${this.where} refused to list the bucket (${errorName(err)}: ${e.message ?? 'no message'})`);
  }

  async moveIn(key: string, sourcePath: string): Promise<void> {
    const Key = this.objectKey(key);
    // An empty file as what it is (Upload would send it without a length).
    if ((await fsp.stat(sourcePath)).size === 0) await this.write(key, Buffer.alloc(0));
    else {
      await this.call(null, () =>
        // One PutObject for a file within one part, a multipart upload (aborted on failure) for more.
        new Upload({ client: this.client, params: { Bucket: this.bucket, Key, Body: fs.createReadStream(sourcePath) }, partSize: this.partBytes, queueSize: UPLOAD_QUEUE }).done(),
      );
    }
    await fsp.rm(sourcePath, { force: true });
  }

  async write(key: string, data: string | Buffer): Promise<void> {
    const Key = this.objectKey(key);
    const ContentLength = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    await this.call(null, () => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key, Body: data, ContentLength })));
  }

  async copy(fromKey: string, toKey: string): Promise<void> {
    const from = this.objectKey(fromKey);
    const to = this.objectKey(toKey);
    // CopySource is URL-encoded (the SDK sends it as given); slashes may stay.
    const CopySource = `${this.bucket}/${from.split('/').map(encodeURIComponent).join('/')}`;
    await this.call(fromKey, async () => {
      const { ContentLength: size = 0 } = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: from }));
      if (size <= this.copyPartBytes) {
        await this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: to, CopySource }));
        return;
      }
      const { UploadId } = await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: to }));
      try {
        const Parts: Array<{ PartNumber: number; ETag?: string }> = [];
        for (let start = 0; start < size; start += this.copyPartBytes) {
          const PartNumber = Parts.length + 1;
          const CopySourceRange = `bytes=${start}-${Math.min(start + this.copyPartBytes, size) - 1}`;
          const { CopyPartResult } = await this.client.send(new UploadPartCopyCommand({ Bucket: this.bucket, Key: to, UploadId, PartNumber, CopySource, CopySourceRange }));
          Parts.push({ PartNumber, ...(CopyPartResult?.ETag ? { ETag: CopyPartResult.ETag } : {}) });
        }
        await this.client.send(new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: to, UploadId, MultipartUpload: { Parts } }));
      } catch (err) {
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: to, UploadId })).catch(() => undefined);
        throw err;
      }
    });
  }

  private async object(key: string) {
    const { Body } = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.objectKey(key) }));
    return Body!;
  }

  read(key: string): Promise<Buffer> {
    return this.call(key, async () => Buffer.from(await (await this.object(key)).transformToByteArray()));
  }

  async readText(key: string): Promise<string> {
    return (await this.read(key)).toString('utf8');
  }

  download(key: string, localPath: string): Promise<void> {
    return this.call(key, async () => pipeline((await this.object(key)) as Readable, fs.createWriteStream(localPath)));
  }

  async exists(key: string): Promise<boolean> {
    const Key = this.objectKey(key);
    try {
      await this.call(null, () => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key })));
      return true;
    } catch (err) {
      if (isMissingKey(err)) return false;
      throw err;
    }
  }

  stream(key: string): Promise<Readable> {
    return this.call(key, async () => (await this.object(key)) as Readable);
  }

  async removePrefix(prefix: string): Promise<void> {
    const base = this.objectKey(trimEndOf(prefix, '/'));
    await this.call(null, async () => {
      // What is under `base/`, page by page; then the object named `base` itself (a file key).
      let ContinuationToken: string | undefined;
      do {
        const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: `${base}/`, MaxKeys: DELETE_BATCH, ...(ContinuationToken ? { ContinuationToken } : {}) }));
        const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [{ Key: o.Key }] : []));
        if (keys.length) await this.deleteBatch(keys);
        ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (ContinuationToken);
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: base }));
    });
  }

  private async deleteBatch(Objects: Array<{ Key: string }>): Promise<void> {
    const { Errors = [] } = await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects, Quiet: true } }));
    const first = Errors.find((e) => e.Code !== 'NoSuchKey');
    if (!first) return;
    // The store answered, but not for every key: a busy or failing store is an outage like any other.
    const error = Object.assign(new Error(`the object store did not delete ${Errors.length} of ${Objects.length} keys (${first.Key}: ${first.Code} ${first.Message ?? ''})`), { name: first.Code ?? 'Error' });
    if (['SlowDown', 'InternalError', 'ServiceUnavailable'].includes(first.Code ?? '')) Object.assign(error, { $metadata: { httpStatusCode: 503 } });
    throw error;
  }
}
