// An agent on the AWS SDK for JavaScript v3, with its defaults (retries, checksums): PutObject, then
// CopyObject of what it put, with metadata. Its arguments: the node_modules folder holding
// @aws-sdk/client-s3, and the bucket. It prints what it read from the answers and how many attempts
// each request took (the SDK retries an answer it cannot parse).

const { S3Client, PutObjectCommand, CopyObjectCommand } = require(`${process.argv[2]}/@aws-sdk/client-s3`);

const bucket = process.argv[3];
const s3 = new S3Client({
  endpoint: process.env.REVIEWER_API_URL,
  forcePathStyle: true,
  region: "us-east-1",
  credentials: { accessKeyId: "child-holds-no-key", secretAccessKey: "child-holds-no-key" },
});

(async () => {
  const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: "js.txt", Body: "from javascript" }));
  const copied = await s3.send(
    new CopyObjectCommand({
      Bucket: bucket,
      Key: "js-copy.txt",
      CopySource: `${bucket}/js.txt`,
      Metadata: { owner: "javascript" },
      MetadataDirective: "REPLACE",
    }),
  );
  const seen = {
    put: put.ETag,
    copied: copied.CopyObjectResult.ETag,
    attempts: [put.$metadata.attempts, copied.$metadata.attempts],
  };
  console.log(`SEEN ${JSON.stringify(seen)}`);
})().catch((error) => {
  console.error(error);
  process.exit(1);
});
