import { BlockList, isIP } from 'node:net';

/**
 * Where webhooks may be delivered. By default nowhere on the server's own machine or network:
 * loopback, private (RFC 1918, CGNAT, unique-local), link-local (cloud metadata at
 * 169.254.169.254 and fd00:ec2::254 included), unspecified, multicast and reserved addresses
 * are refused, both for literal addresses in the URL (at creation) and for what a host name
 * resolves to when the connection is made (so DNS cannot point a public name at them later).
 * `allowPrivate` lifts the whole rule (local receivers); `allowCidrs` lifts it for some ranges.
 */
export class WebhookTargets {
  private readonly refused = new BlockList();
  private readonly allowed = new BlockList();

  constructor(private readonly policy: { allowPrivate: boolean; allowCidrs: readonly string[] }) {
    for (const [network, prefix] of REFUSED_V4) this.refused.addSubnet(network, prefix, 'ipv4');
    for (const [network, prefix] of REFUSED_V6) this.refused.addSubnet(network, prefix, 'ipv6');
    for (const cidr of policy.allowCidrs) {
      const [network = '', prefix = ''] = cidr.split('/');
      const family = isIP(network) === 6 ? 'ipv6' : 'ipv4';
      this.allowed.addSubnet(network, Number(prefix || (family === 'ipv6' ? 128 : 32)), family);
    }
  }

  /** Why a connection to this address is refused, or null when it may be made. */
  refusal(address: string): string | null {
    if (this.policy.allowPrivate) return null;
    const family = isIP(address) === 6 ? 'ipv6' : isIP(address) === 4 ? 'ipv4' : null;
    if (family === null) return null;
    if (this.allowed.check(address, family)) return null;
    if (!this.refused.check(address, family)) return null;
    return `${address} is a loopback, private, link-local or reserved address (set AGENTD_WEBHOOK_ALLOW_PRIVATE=true or AGENTD_WEBHOOK_ALLOW_CIDRS for local receivers)`;
  }

  /** What can be told from the URL alone: a literal address, or a name that always means this machine. */
  urlRefusal(url: URL): string | null {
    if (this.policy.allowPrivate) return null;
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    if (host === 'localhost' || host.endsWith('.localhost')) return `${host} is this machine (set AGENTD_WEBHOOK_ALLOW_PRIVATE=true for local receivers)`;
    return this.refusal(host);
  }
}

const REFUSED_V4: [string, number][] = [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24],
  ['224.0.0.0', 4], ['240.0.0.0', 4],
];
const REFUSED_V6: [string, number][] = [
  // IPv4-mapped forms (::ffff:127.0.0.1) are checked by BlockList against the IPv4 rules.
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96], ['2001:db8::', 32],
];
