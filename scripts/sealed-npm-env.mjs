// The environment npm and napi run in when a release is rehearsed (scripts/release-dry-run.mjs,
// __tests__/release.test.mjs): nothing they do can reach a registry with credentials.
import fs from 'node:fs'
import path from 'node:path'

/** A closed local port: what is sent there is refused at once. */
export const CLOSED = 'http://127.0.0.1:9/'

/**
 * `process.env` without credentials and without what `npm run` set for its script (a parent's
 * `npm_config_dry_run=false` or token among it), npm reading no ~/.npmrc (an empty one in
 * `dir` instead), and every HTTP(S) request npm makes sent to a closed port through its proxy
 * settings: `publishConfig.registry` in a package.json overrides the registry setting, not the
 * proxy. With `dryRun`, also `npm_config_dry_run=true` and the registry on the closed port; without
 * it, the default registry stays, as its URLs key npm's cache (an `--offline` install reads it).
 * @param {string} dir
 * @param {{ dryRun: boolean }} options
 */
export function sealedNpmEnv(dir, { dryRun }) {
  const env = {}
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(npm_|NODE_AUTH_TOKEN$|NPM_TOKEN$|GITHUB_TOKEN$|GH_TOKEN$|GITHUB_REPOSITORY$|ACTIONS_ID_TOKEN_REQUEST_)/i.test(name)) continue
    env[name] = value
  }
  const userconfig = path.join(dir, 'empty-npmrc')
  fs.writeFileSync(userconfig, '')
  return {
    ...env,
    npm_config_userconfig: userconfig,
    npm_config_proxy: CLOSED,
    npm_config_https_proxy: CLOSED,
    npm_config_noproxy: '',
    npm_config_fetch_retries: '0',
    npm_config_update_notifier: 'false',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    // As the release workflow's publish step sets it.
    NPM_CONFIG_PROVENANCE: 'true',
    ...(dryRun ? { npm_config_dry_run: 'true', npm_config_registry: CLOSED } : { npm_config_dry_run: 'false' }),
  }
}
