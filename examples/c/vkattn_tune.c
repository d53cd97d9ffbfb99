/* vkattn-tune: tunes vkattn's kernel choices on this machine's default
 * device (vkattn_tune) and prints what won, per case: the winner's kernel
 * options, its median time, the device table's choice's time and the
 * speedup. Every later context of the device uses the winners (the tuning
 * file: docs/guide/tuning.md).
 *
 *   vkattn-tune [--seconds N] [--case GLOB]... [--json FILE] [--list]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tool_args.h"
#include "vkattn/vkattn.h"

#define MAX_CASES 64

struct row {
  char name[64];
  char winner[160];
  double ms, table_ms;
  int candidates, failed;
};

struct state {
  struct row rows[MAX_CASES];
  int n;
  int bar; /* stderr is a terminal: one progress line, redrawn */
};

static struct row* row_of(struct state* st, const char* name) {
  int i;
  for (i = 0; i < st->n; ++i)
    if (strcmp(st->rows[i].name, name) == 0) return &st->rows[i];
  if (st->n == MAX_CASES) return NULL;
  memset(&st->rows[st->n], 0, sizeof(st->rows[0]));
  snprintf(st->rows[st->n].name, sizeof(st->rows[0].name), "%s", name);
  st->rows[st->n].table_ms = -1;
  return &st->rows[st->n++];
}

static void on_progress(void* user, const char* case_name, const char* candidate, double ms) {
  struct state* st = (struct state*)user;
  struct row* r = row_of(st, case_name);
  if (!r) return;
  if (strncmp(candidate, "winner: ", 8) == 0) {
    snprintf(r->winner, sizeof(r->winner), "%s", candidate + 8);
    r->ms = ms;
  } else {
    if (strcmp(candidate, "-") == 0) r->table_ms = ms;
    r->candidates++;
    if (ms == -1) r->failed++;
  }
  if (st->bar)
    fprintf(stderr, "\r\033[K[%d] %s: %d candidate(s), last %s %s", st->n, case_name, r->candidates,
            candidate,
            ms >= 0    ? "ok"
            : ms == -1 ? "FAILED CHECK"
                       : "skipped");
  else
    fprintf(stderr, "vkattn-tune: %s: %s %.3f ms\n", case_name, candidate, ms);
}

static void usage(FILE* to) {
  fprintf(to,
          "usage: vkattn-tune [--seconds N] [--case GLOB]... [--json FILE] [--list]\n"
          "  --seconds N  the budget (default: the library's, vkattn_tune_desc_init)\n"
          "  --case GLOB  only cases whose name matches (repeatable; each must match one)\n"
          "  --json FILE  also write the winners as JSON\n"
          "  --list       list the cases\n");
}

/* A bad argument: what is wrong, the usage, exit status 2. */
static int refuse(const char* what, const char* why) {
  fprintf(stderr, "vkattn-tune: \"%s\" %s\n", what, why);
  usage(stderr);
  return 2;
}

int main(int argc, char** argv) {
  int list = 0, help = 0;
  struct state st;
  const char* cases[MAX_CASES];
  const char* json = NULL;
  uint32_t n_cases = 0, i;
  vkattn_tune_desc d;
  vkattn_context* ctx = NULL;
  vkattn_status s;
  memset(&st, 0, sizeof(st));
  vkattn_tune_desc_init(&d);
  /* Every argument is checked before any acts (--list included). */
  for (i = 1; i < (uint32_t)argc; ++i) {
    const char* a = argv[i];
    const int takes_value =
        strcmp(a, "--seconds") == 0 || strcmp(a, "--case") == 0 || strcmp(a, "--json") == 0;
    if (takes_value && i + 1 >= (uint32_t)argc) return refuse(a, "needs a value");
    if (strcmp(a, "--seconds") == 0) {
      if (!tool_parse_seconds(argv[++i], 0, 86400, &d.seconds))
        return refuse(argv[i], "is not a number of seconds in (0, 86400] (--seconds)");
    } else if (strcmp(a, "--case") == 0) {
      if (n_cases == MAX_CASES) return refuse(argv[i + 1], "is one --case too many");
      cases[n_cases++] = argv[++i];
    } else if (strcmp(a, "--json") == 0) {
      json = argv[++i];
    } else if (strcmp(a, "--list") == 0) {
      list = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      help = 1;
    } else {
      return refuse(a, "is not an argument vkattn-tune takes");
    }
  }
  for (i = 0; i < n_cases; ++i) {
    uint32_t c;
    int any = 0;
    const char* name;
    for (c = 0; (name = vkattn_tune_case_name(c)) != NULL; ++c)
      any |= tool_glob_match(cases[i], name);
    if (!any) return refuse(cases[i], "matches no case (--list names them)");
  }
  if (json && !tool_writable(json)) return refuse(json, "cannot be written (--json)");
  if (list && (n_cases || json)) return refuse("--list", "takes no other argument");
  if (help) {
    usage(stdout);
    return 0;
  }
  if (list) {
    const char* name;
    for (i = 0; (name = vkattn_tune_case_name(i)) != NULL; ++i) printf("%s\n", name);
    return 0;
  }
  d.num_cases = n_cases;
  d.cases = n_cases ? cases : NULL;
  d.progress = on_progress;
  d.user = &st;
  st.bar = isatty(2);
  if ((s = vkattn_context_create(NULL, &ctx)) != VKATTN_SUCCESS) {
    fprintf(stderr, "vkattn_context_create: %s (%s)\n", vkattn_status_string(s),
            vkattn_last_error());
    return 1;
  }
  s = vkattn_tune(ctx, &d);
  if (st.bar) fprintf(stderr, "\n");
  if (s != VKATTN_SUCCESS) {
    fprintf(stderr, "vkattn_tune: %s (%s)\n", vkattn_status_string(s), vkattn_last_error());
    vkattn_context_destroy(ctx);
    return 1;
  }
  printf("%-22s %9s %9s %7s %5s  %s\n", "case", "tuned ms", "table ms", "speedup", "tried",
         "winner (kernel options; - = the device table's)");
  for (i = 0; i < (uint32_t)st.n; ++i) {
    const struct row* r = &st.rows[i];
    if (!r->winner[0]) {
      printf("%-22s %9s %9s %7s %5d  (no candidate finished within the budget)\n", r->name, "-",
             "-", "-", r->candidates);
      continue;
    }
    printf("%-22s %9.3f %9.3f %6.2fx %5d  %s%s\n", r->name, r->ms, r->table_ms,
           r->table_ms > 0 && r->ms > 0 ? r->table_ms / r->ms : 0.0, r->candidates, r->winner,
           r->failed ? " (some candidates failed their checks)" : "");
  }
  if (json) {
    FILE* f = fopen(json, "w");
    if (!f) {
      fprintf(stderr, "vkattn-tune: cannot write %s\n", json);
      vkattn_context_destroy(ctx);
      return 1;
    }
    fprintf(f, "{\"seconds\": %.1f, \"cases\": [", d.seconds);
    for (i = 0; i < (uint32_t)st.n; ++i) {
      const struct row* r = &st.rows[i];
      fprintf(f,
              "%s\n  {\"name\": \"%s\", \"winner\": \"%s\", \"ms\": %.4f, \"table_ms\": %.4f, "
              "\"candidates\": %d, \"failed_checks\": %d}",
              i ? "," : "", r->name, r->winner, r->ms, r->table_ms, r->candidates, r->failed);
    }
    fprintf(f, "\n]}\n");
    fclose(f);
  }
  vkattn_context_destroy(ctx);
  return 0;
}
