// Runs a command under a seccomp filter read from a rules file, the way a container runtime
// applies a profile: `seccomp-exec RULES COMMAND [ARGS...]`. Built by the test that uses it.
// Each line of RULES: `default ERRNO`, or `NAME ACTION ERRNO NARGS` then NARGS times `INDEX OP A B`
// (ACTION: allow or errno; OP as libseccomp numbers it). Linked against libseccomp.so.2 directly:
// its header is not needed for the few calls made here.
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct scmp_arg_cmp { unsigned int arg; int op; uint64_t datum_a; uint64_t datum_b; };
extern void *seccomp_init(uint32_t def_action);
extern int seccomp_syscall_resolve_name(const char *name);
extern int seccomp_rule_add_array(void *ctx, uint32_t action, int syscall, unsigned int arg_cnt, const struct scmp_arg_cmp *arg_array);
extern int seccomp_load(void *ctx);

#define ACT_ALLOW 0x7fff0000U
#define ACT_ERRNO(x) (0x00050000U | ((x) & 0x0000ffffU))

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: seccomp-exec RULES COMMAND [ARGS...]\n"); return 125; }
  FILE *rules = fopen(argv[1], "r");
  if (!rules) { perror(argv[1]); return 125; }
  unsigned int def;
  if (fscanf(rules, " default %u", &def) != 1) { fprintf(stderr, "seccomp-exec: no default line\n"); return 125; }
  void *ctx = seccomp_init(ACT_ERRNO(def));
  if (!ctx) { fprintf(stderr, "seccomp-exec: seccomp_init failed\n"); return 125; }
  char name[128], action[16];
  unsigned int err, nargs;
  while (fscanf(rules, " %127s %15s %u %u", name, action, &err, &nargs) == 4) {
    struct scmp_arg_cmp args[6];
    if (nargs > 6) { fprintf(stderr, "seccomp-exec: too many args for %s\n", name); return 125; }
    for (unsigned int i = 0; i < nargs; i++) {
      unsigned long long a, b;
      if (fscanf(rules, " %u %d %llu %llu", &args[i].arg, &args[i].op, &a, &b) != 4) { fprintf(stderr, "seccomp-exec: bad args for %s\n", name); return 125; }
      args[i].datum_a = a;
      args[i].datum_b = b;
    }
    int nr = seccomp_syscall_resolve_name(name);
    // Not a syscall on this architecture (chown32 on x86_64...): a runtime skips it too.
    if (nr < 0) continue;
    uint32_t act = strcmp(action, "allow") == 0 ? ACT_ALLOW : ACT_ERRNO(err);
    int rc = seccomp_rule_add_array(ctx, act, nr, nargs, args);
    if (rc < 0) { fprintf(stderr, "seccomp-exec: rule for %s: %s\n", name, strerror(-rc)); return 125; }
  }
  fclose(rules);
  int rc = seccomp_load(ctx);
  if (rc < 0) { fprintf(stderr, "seccomp-exec: load: %s\n", strerror(-rc)); return 125; }
  execvp(argv[2], argv + 2);
  perror(argv[2]);
  return 127;
}
