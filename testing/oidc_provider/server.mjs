// A real OpenID provider (the npm package oidc-provider) for accessgate's sign-in tests.
//
// Usage: node server.mjs CONFIG.json
// CONFIG: {"issuer", "port", "clients": [...], "jwks": {"keys": [...]}, "accounts_file"}
// The accounts file maps each sub to {"email", "name", "groups"}; it is read at every
// lookup, so a test changes someone's groups at the provider by rewriting it. The provider's
// own development login and consent pages are used: any password signs in as the login typed.
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));

function accounts() {
  return JSON.parse(readFileSync(config.accounts_file, 'utf8'));
}

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: config.jwks,
  cookies: { keys: ['accessgate-test-provider-cookie-key'] },
  scopes: ['openid', 'email', 'profile', 'groups'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  // Scope claims go into the ID token too, as most identity providers do for the code flow.
  conformIdTokenClaims: false,
  async findAccount(_ctx, sub) {
    const account = accounts()[sub];
    if (!account) return undefined;
    return {
      accountId: sub,
      async claims() {
        return { sub, email_verified: true, ...account };
      },
    };
  },
  ttl: { AccessToken: 600, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 600, Grant: 600 },
});

provider.listen(config.port, '127.0.0.1', () => {
  console.log(`ready ${config.issuer}`);
});
