// A real OpenID provider for the sign-in tests: panva's oidc-provider (certified OpenID Connect), with its
// discovery document, an RS256 key made at start, the authorization-code flow behind a login form of our own,
// and a `groups` claim. Consent is given on the user's behalf (the client is first-party here).
//
//   node provider.mjs CONFIG.json
//
// CONFIG: {"clients": [{client_id, client_secret, redirect_uris, token_endpoint_auth_method?}],
//          "users": [{"login", "password", "sub", "claims": {preferred_username, email, groups, ...}}]}
// It listens on a free port of 127.0.0.1 and prints one line, `issuer http://127.0.0.1:PORT`, once it answers.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as http from 'node:http';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const bySub = new Map(config.users.map((user) => [user.sub, user]));
const byLogin = new Map(config.users.map((user) => [user.login, user]));

function signingKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: `rs256-${randomBytes(4).toString('hex')}`, alg: 'RS256', use: 'sig' };
}

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginPage(uid, clientId, error) {
  return `<!doctype html><html><head><title>Test identity provider: sign in</title></head><body>
<h1>Sign in to continue to ${escape(clientId)}</h1>
${error ? `<p id="error" role="alert">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login">
  <label>Username <input name="login" id="login" autocomplete="username" required></label>
  <label>Password <input name="password" id="password" type="password" autocomplete="current-password" required></label>
  <button type="submit" id="submit">Sign in</button>
</form></body></html>`;
}

async function formBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function send(res, status, html) {
  res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8', 'Cache-Control': 'no-store' });
  res.end(html);
}

async function interaction(provider, req, res, submitted) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session } = details;
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    if (prompt.details.missingOIDCClaims) grant.addOIDCClaims(prompt.details.missingOIDCClaims);
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  if (!submitted || req.method !== 'POST') {
    send(res, 200, loginPage(uid, params.client_id));
    return;
  }
  const form = await formBody(req);
  const user = byLogin.get(form.get('login'));
  if (!user || user.password !== form.get('password')) {
    send(res, 200, loginPage(uid, params.client_id, 'Wrong username or password.'));
    return;
  }
  await provider.interactionFinished(req, res, { login: { accountId: user.sub } }, { mergeWithLastSubmission: false });
}

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: config.clients.map((client) => ({
      grant_types: ['authorization_code'],
      response_types: ['code'],
      ...client,
    })),
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['preferred_username', 'name'],
      groups: ['groups'],
    },
    features: { devInteractions: { enabled: false } },
    interactions: { url: (ctx, found) => `/interaction/${found.uid}` },
    jwks: { keys: [signingKey()] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    async findAccount(ctx, sub) {
      const user = bySub.get(sub);
      if (!user) return undefined;
      return { accountId: sub, claims: async () => ({ ...user.claims, sub }) };
    },
  });
  const oidc = provider.callback();
  server.on('request', (req, res) => {
    const path = new URL(req.url, issuer).pathname;
    const route = path.match(/^\/interaction\/([\w-]+)(\/login)?$/);
    if (!route) {
      oidc(req, res);
      return;
    }
    interaction(provider, req, res, Boolean(route[2])).catch((error) => {
      console.error(error);
      send(res, 500, `<p id="error">${escape(error.message)}</p>`);
    });
  });
  console.log(`issuer ${issuer}`);
});
