/**
 * Tokens that also make `git` authenticate to their host. The credential helper is configured
 * through git's environment config (GIT_CONFIG_COUNT/KEY/VALUE, git >= 2.31) and reads the
 * token from the environment when git asks, so no token is ever written to a file.
 */
const HOSTS: readonly { variable: string; host: string; username: string }[] = [
  { variable: 'GITHUB_TOKEN', host: 'github.com', username: 'x-access-token' },
  { variable: 'GITLAB_TOKEN', host: 'gitlab.com', username: 'oauth2' },
  { variable: 'BITBUCKET_TOKEN', host: 'bitbucket.org', username: 'x-token-auth' },
];

export function gitCredentialEnv(secretNames: readonly string[]): Record<string, string> {
  const configured = HOSTS.filter(({ variable }) => secretNames.includes(variable));
  if (configured.length === 0) return {};
  const env: Record<string, string> = { GIT_TERMINAL_PROMPT: '0', GIT_CONFIG_COUNT: String(configured.length) };
  configured.forEach(({ variable, host, username }, index) => {
    env[`GIT_CONFIG_KEY_${index}`] = `credential.https://${host}.helper`;
    env[`GIT_CONFIG_VALUE_${index}`] = `!f() { test "$1" = get || exit 0; echo username=${username}; echo "password=$${variable}"; }; f`;
  });
  return env;
}
