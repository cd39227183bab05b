import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { loadConfig, ConfigError } from '../../lib/platform/config.js';
import { repoRoot } from '../../scripts/stack.js';

const valid = { ADMIN_API_KEY: 'a-long-enough-admin-key' };

describe('configuration, validated once at start-up', () => {
  it('fills every unset setting with its documented default', () => {
    const c = loadConfig(valid);
    assert.equal(c.databaseUrl, 'postgresql://postgres@127.0.0.1:5432/dwb_dev');
    assert.equal(c.temporalAddress, '127.0.0.1:7233');
    assert.equal(c.temporalNamespace, 'default');
    assert.equal(c.weaviateUrl, 'http://127.0.0.1:8080');
    assert.equal(c.weaviateTimeoutMs, 30_000);
    assert.equal(c.port, 3000);
    assert.equal(c.openaiBaseUrl, null);
    assert.ok(c.storageDir.endsWith('.data/storage'));
    assert.equal(c.objectStore, null, 'stored files in STORAGE_DIR unless STORAGE_URL is set');
    assert.deepEqual(c.dialogAnalysis, {
      model: 'gpt-4.1-mini',
      responseFormat: 'auto',
      maxAttempts: 3,
      maxOutputTokens: 4096,
      timeoutSeconds: 300,
      maxOutageSeconds: 1800,
      retentionSeconds: 86400,
      rateLimitPerMinute: 60,
      validationTimeoutMs: 5000,
    });
    assert.deepEqual(c.videoDataApi, { baseUrl: 'https://www.googleapis.com/youtube/v3', apiKey: null, timeoutMs: 30_000, unitPriceUsd: null });
    assert.deepEqual(c.channels, { scanIntervalSeconds: 86400, retryInitialSeconds: 60, retryMaxSeconds: 3600, importConcurrency: 4 });
    assert.equal(c.transcription.model, null);
    assert.equal(c.transcription.audioTaskQueue, 'knowledge-audio');
    assert.equal(c.transcription.retentionSeconds, 30 * 86400);
    assert.equal(c.transcription.audioFetchMaxBytes, 100 * 1024 * 1024);
    assert.equal(c.speech.remoteVoices.length, 13);
  });

  it('TRUST_PROXY: off by default; true, a number of hops, or a list of addresses and subnets', () => {
    assert.equal(loadConfig(valid).trustProxy, false);
    assert.equal(loadConfig({ ...valid, TRUST_PROXY: 'true' }).trustProxy, true);
    assert.equal(loadConfig({ ...valid, TRUST_PROXY: '2' }).trustProxy, 2);
    assert.deepEqual(loadConfig({ ...valid, TRUST_PROXY: 'loopback, 10.0.0.0/8,fd00::/8' }).trustProxy, ['loopback', '10.0.0.0/8', 'fd00::/8']);
  });

  it('the transcription and speech models use the shared OpenAI-compatible API unless given their own', () => {
    const shared = loadConfig({ ...valid, OPENAI_BASE_URL: 'http://llm.local/v1', OPENAI_API_KEY: 'sk-a', TRANSCRIPTION_MODEL: 'whisper-1' });
    assert.deepEqual([shared.transcription.baseUrl, shared.transcription.apiKey], ['http://llm.local/v1', 'sk-a']);
    const own = loadConfig({ ...valid, OPENAI_BASE_URL: 'http://llm.local/v1', SPEECH_MODEL: 'tts', SPEECH_BASE_URL: 'http://tts.local/v1/', SPEECH_API_KEY: 'sk-b' });
    assert.deepEqual([own.speech.baseUrl, own.speech.apiKey], ['http://tts.local/v1', 'sk-b']);
  });

  it('STORAGE_URL: s3://bucket or s3://bucket/prefix, with path style by default only for an S3_ENDPOINT of its own', () => {
    const aws = loadConfig({ ...valid, STORAGE_URL: 's3://kb-files' });
    assert.deepEqual(aws.objectStore, { url: 's3://kb-files', bucket: 'kb-files', prefix: '', endpoint: null, region: 'us-east-1', forcePathStyle: false, credentials: null });
    const own = loadConfig({
      ...valid,
      STORAGE_URL: 's3://kb-files/prod/eu/',
      S3_ENDPOINT: 'http://127.0.0.1:7070/',
      S3_REGION: 'eu-central-1',
      AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'secret-of-the-test',
      AWS_SESSION_TOKEN: 'session-of-the-test',
    });
    assert.deepEqual(own.objectStore, {
      url: 's3://kb-files/prod/eu/',
      bucket: 'kb-files',
      prefix: 'prod/eu',
      endpoint: 'http://127.0.0.1:7070',
      region: 'eu-central-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret-of-the-test', sessionToken: 'session-of-the-test' },
    });
    assert.equal(loadConfig({ ...valid, STORAGE_URL: 's3://kb-files', S3_ENDPOINT: 'https://s3.example.org', S3_FORCE_PATH_STYLE: 'false' }).objectStore?.forcePathStyle, false);
    assert.equal(loadConfig({ ...valid, STORAGE_URL: 's3://kb-files', S3_FORCE_PATH_STYLE: 'true' }).objectStore?.forcePathStyle, true);
  });

  const bad: Array<[string, Record<string, string>, RegExp]> = [
    ['a STORAGE_URL of another scheme', { ...valid, STORAGE_URL: 'file:///srv/files' }, /STORAGE_URL must be s3:\/\/<bucket> or s3:\/\/<bucket>\/<prefix>/],
    ['a STORAGE_URL without a bucket', { ...valid, STORAGE_URL: 's3://' }, /STORAGE_URL names bucket "", not a valid bucket name/],
    ['a STORAGE_URL whose bucket name S3 refuses', { ...valid, STORAGE_URL: 's3://KB_Files/x' }, /STORAGE_URL names bucket "KB_Files", not a valid bucket name/],
    ['a STORAGE_URL with credentials in it', { ...valid, STORAGE_URL: 's3://key:secret@kb-files' }, /STORAGE_URL must not carry credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/],
    ['a STORAGE_URL prefix with an empty or ".." segment', { ...valid, STORAGE_URL: 's3://kb-files/a//b' }, /STORAGE_URL's prefix must be path segments/],
    ['a STORAGE_URL prefix that climbs', { ...valid, STORAGE_URL: 's3://kb-files/../b' }, /STORAGE_URL's prefix must be path segments/],
    ['an S3_ENDPOINT that is not a URL', { ...valid, STORAGE_URL: 's3://kb-files', S3_ENDPOINT: '127.0.0.1:7070' }, /S3_ENDPOINT is not a valid URL/],
    ['an S3_REGION that is not a region name', { ...valid, STORAGE_URL: 's3://kb-files', S3_REGION: 'eu central' }, /S3_REGION must be a region name/],
    ['an S3_FORCE_PATH_STYLE that is not a boolean', { ...valid, STORAGE_URL: 's3://kb-files', S3_FORCE_PATH_STYLE: 'sometimes' }, /S3_FORCE_PATH_STYLE must be true or false/],
    ['an S3_ENDPOINT without STORAGE_URL (the files would stay local)', { ...valid, S3_ENDPOINT: 'http://127.0.0.1:7070' }, /S3_ENDPOINT is set but STORAGE_URL is not/],
    ['an AWS_ACCESS_KEY_ID without its secret', { ...valid, STORAGE_URL: 's3://kb-files', AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE' }, /AWS_SECRET_ACCESS_KEY is required with AWS_ACCESS_KEY_ID/],
    ['an AWS_SECRET_ACCESS_KEY without its key id', { ...valid, STORAGE_URL: 's3://kb-files', AWS_SECRET_ACCESS_KEY: 'secret-of-the-test' }, /AWS_ACCESS_KEY_ID is required with AWS_SECRET_ACCESS_KEY/],
    ['an AWS_SESSION_TOKEN alone', { ...valid, STORAGE_URL: 's3://kb-files', AWS_SESSION_TOKEN: 'session-of-the-test' }, /AWS_SESSION_TOKEN needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/],
    ['a missing ADMIN_API_KEY', {}, /ADMIN_API_KEY is required/],
    ['a short ADMIN_API_KEY', { ADMIN_API_KEY: 'short' }, /ADMIN_API_KEY must be at least 16/],
    ['a DATABASE_URL that is not a URL', { ...valid, DATABASE_URL: 'not a url' }, /DATABASE_URL is not a valid URL/],
    ['a DATABASE_URL of another database kind', { ...valid, DATABASE_URL: 'mysql://x@y/z' }, /DATABASE_URL must use postgresql:/],
    ['a TEMPORAL_ADDRESS without a port', { ...valid, TEMPORAL_ADDRESS: 'localhost' }, /TEMPORAL_ADDRESS must be host:port/],
    ['a WEAVIATE_URL with another scheme', { ...valid, WEAVIATE_URL: 'ftp://x' }, /WEAVIATE_URL must use http: or https:/],
    ['a non-numeric PORT', { ...valid, PORT: 'eighty' }, /PORT must be a whole number/],
    ['a PORT out of range', { ...valid, PORT: '70000' }, /PORT must be between 0 and 65535/],
    ['an invalid OPENAI_BASE_URL', { ...valid, OPENAI_BASE_URL: '::' }, /OPENAI_BASE_URL is not a valid URL/],
    ['an unknown LOG_LEVEL', { ...valid, LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
    ['an unknown DIALOG_ANALYSIS_RESPONSE_FORMAT', { ...valid, DIALOG_ANALYSIS_RESPONSE_FORMAT: 'xml' }, /DIALOG_ANALYSIS_RESPONSE_FORMAT must be one of auto, json_schema, json_object, prompt/],
    ['DIALOG_ANALYSIS_MAX_ATTEMPTS out of range', { ...valid, DIALOG_ANALYSIS_MAX_ATTEMPTS: '0' }, /DIALOG_ANALYSIS_MAX_ATTEMPTS must be between 1 and 10/],
    ['DIGITIZATION_MAX_OUTAGE_SECONDS over a day', { ...valid, DIGITIZATION_MAX_OUTAGE_SECONDS: '86401' }, /DIGITIZATION_MAX_OUTAGE_SECONDS must be between 1 and 86400/],
    ['VENDOR_SYNC_MAX_OUTAGE_SECONDS of zero', { ...valid, VENDOR_SYNC_MAX_OUTAGE_SECONDS: '0' }, /VENDOR_SYNC_MAX_OUTAGE_SECONDS must be between 1 and 86400/],
    ['WEAVIATE_TIMEOUT_SECONDS of zero', { ...valid, WEAVIATE_TIMEOUT_SECONDS: '0' }, /WEAVIATE_TIMEOUT_SECONDS must be between 1 and 3600/],
    ['EMBEDDING_MAX_OUTAGE_SECONDS over a week', { ...valid, EMBEDDING_MAX_OUTAGE_SECONDS: '604801' }, /EMBEDDING_MAX_OUTAGE_SECONDS must be between 1 and 604800/],
    ['DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS over 6 hours', { ...valid, DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS: '21601' }, /DIALOG_ANALYSIS_MAX_OUTAGE_SECONDS must be between 1 and 21600/],
    ['a non-numeric DIALOG_ANALYSIS_RETENTION_SECONDS', { ...valid, DIALOG_ANALYSIS_RETENTION_SECONDS: '1d' }, /DIALOG_ANALYSIS_RETENTION_SECONDS must be a whole number/],
    ['DIALOG_ANALYSIS_TIMEOUT_SECONDS beyond the call activity', { ...valid, DIALOG_ANALYSIS_TIMEOUT_SECONDS: '601' }, /DIALOG_ANALYSIS_TIMEOUT_SECONDS must be between 1 and 600/],
    ['a negative DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE', { ...valid, DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE: '-1' }, /DIALOG_ANALYSIS_RATE_LIMIT_PER_MINUTE must be a whole number/],
    ['DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS below 100', { ...valid, DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS: '10' }, /DIALOG_ANALYSIS_VALIDATION_TIMEOUT_MS must be between 100 and 60000/],
    ['DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS below 16', { ...valid, DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS: '8' }, /DIALOG_ANALYSIS_MAX_OUTPUT_TOKENS must be between 16/],
    ['a zero CHANNEL_SCAN_INTERVAL_SECONDS', { ...valid, CHANNEL_SCAN_INTERVAL_SECONDS: '0' }, /CHANNEL_SCAN_INTERVAL_SECONDS must be between 1 and 31536000/],
    ['more transcript segments than a workflow history holds', { ...valid, TRANSCRIPT_MAX_AUDIO_SECONDS: '604800', TRANSCRIPT_SEGMENT_SECONDS: '5' }, /allows 120960 segments a transcript; at most 2000/],
    ['a BUDGET_RECHECK_INTERVAL_MS below 10', { ...valid, BUDGET_RECHECK_INTERVAL_MS: '1' }, /BUDGET_RECHECK_INTERVAL_MS must be between 10/],
    ['a fractional CHANNEL_SCAN_INTERVAL_SECONDS', { ...valid, CHANNEL_SCAN_INTERVAL_SECONDS: '1.5' }, /CHANNEL_SCAN_INTERVAL_SECONDS must be a whole number/],
    ['a VIDEO_DATA_API_BASE_URL of another scheme', { ...valid, VIDEO_DATA_API_BASE_URL: 'ftp://example.org/youtube/v3' }, /VIDEO_DATA_API_BASE_URL must use http: or https:/],
    ['a negative VIDEO_DATA_API_UNIT_PRICE_USD', { ...valid, VIDEO_DATA_API_UNIT_PRICE_USD: '-0.1' }, /VIDEO_DATA_API_UNIT_PRICE_USD must be a non-negative decimal/],
    ['a CHANNEL_RETRY_MAX_SECONDS below the initial backoff', { ...valid, CHANNEL_RETRY_INITIAL_SECONDS: '60', CHANNEL_RETRY_MAX_SECONDS: '10' }, /CHANNEL_RETRY_MAX_SECONDS must not be less than CHANNEL_RETRY_INITIAL_SECONDS/],
    ['a TRANSCRIPTION_MODEL with no API to serve it', { ...valid, TRANSCRIPTION_MODEL: 'whisper-1' }, /TRANSCRIPTION_MODEL needs TRANSCRIPTION_BASE_URL or OPENAI_BASE_URL/],
    ['a SPEECH_MODEL with no API to serve it', { ...valid, SPEECH_MODEL: 'tts-1' }, /SPEECH_MODEL needs SPEECH_BASE_URL or OPENAI_BASE_URL/],
    ['a TRANSCRIPT_SEGMENT_SECONDS below 5', { ...valid, TRANSCRIPT_SEGMENT_SECONDS: '2' }, /TRANSCRIPT_SEGMENT_SECONDS must be between 5 and 3600/],
    ['a TRANSCRIPT_AUDIO_FETCH_MAX_BYTES over the 100 MiB audio limit', { ...valid, TRANSCRIPT_AUDIO_FETCH_MAX_BYTES: String(100 * 1024 * 1024 + 1) }, /TRANSCRIPT_AUDIO_FETCH_MAX_BYTES must be between 1024 and 104857600/],
    ['a TRUST_PROXY that names no proxy', { ...valid, TRUST_PROXY: 'loopback, my-balancer' }, /TRUST_PROXY must be true, false, a number of proxies.*"my-balancer"/],
    ['a SPEECH_LANGUAGE_FIELD that is not a field name', { ...valid, SPEECH_LANGUAGE_FIELD: 'a b' }, /SPEECH_LANGUAGE_FIELD must be a JSON field name/],
  ];
  for (const [what, env, message] of bad) {
    it(`rejects ${what}, naming the setting`, () => {
      assert.throws(() => loadConfig(env), (err: unknown) => err instanceof ConfigError && message.test(err.message));
    });
  }

  for (const entry of ['api/server.ts', 'workers/main.ts']) {
    it(`${entry} stops at start-up with a message naming a missing setting`, () => {
      const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' };
      const r = spawnSync(process.execPath, ['--import', 'tsx', entry], { cwd: repoRoot, env, encoding: 'utf8', timeout: 30_000 });
      assert.equal(r.status, 78, r.stderr);
      assert.match(r.stderr, /configuration error: ADMIN_API_KEY is required/);
    });
  }
});
