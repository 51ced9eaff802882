// Signs SNS messages as SNS does and asks AWS's own validator (`sns-validator`, the package AWS
// publishes for SNS HTTP subscribers) whether each holds. Input on stdin:
// {"key": PEM, "certificate": PEM, "messages": [{"version": "1"|"2", "message": {...}}]}.
// Output: {"signed": [message with Signature], "valid": [bool], "tampered_valid": [bool]}.
'use strict';
const crypto = require('crypto');
const https = require('https');
const MessageValidator = require('sns-validator');

// The order and fields SNS signs, from AWS's page on verifying SNS signatures.
const NOTIFICATION = ['Message', 'MessageId', 'Subject', 'Timestamp', 'TopicArn', 'Type'];
const SUBSCRIPTION = ['Message', 'MessageId', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];

function sign(message, version, key) {
  const fields = message.Type === 'Notification' ? NOTIFICATION : SUBSCRIPTION;
  const signer = crypto.createSign(version === '1' ? 'RSA-SHA1' : 'RSA-SHA256');
  for (const name of fields) {
    if (name in message) signer.update(`${name}\n${message[name]}\n`, 'utf8');
  }
  return { ...message, SignatureVersion: version, Signature: signer.sign(key, 'base64') };
}

function validate(validator, message) {
  return new Promise((resolve) => validator.validate(message, (err) => resolve(!err)));
}

async function main() {
  const input = JSON.parse(require('fs').readFileSync(0, 'utf8'));
  // The validator fetches the certificate over https from a host its pattern admits: a local
  // server with the test certificate (which names no local host, hence no TLS check here).
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  const server = https.createServer({ key: input.key, cert: input.certificate }, (req, res) => {
    res.writeHead(200, { 'content-type': 'application/x-pem-file' });
    res.end(input.certificate);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `https://127.0.0.1:${server.address().port}`;
  const validator = new MessageValidator(/^127\.0\.0\.1:\d+$/);
  const out = { signed: [], valid: [], tampered_valid: [] };
  for (const { version, message } of input.messages) {
    const signed = sign(message, version, input.key);
    out.signed.push(signed);
    const local = { ...signed, SigningCertURL: `${origin}/SimpleNotificationService-fake.pem` };
    out.valid.push(await validate(validator, local));
    out.tampered_valid.push(await validate(validator, { ...local, Message: local.Message + ' ' }));
  }
  server.close();
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
