/*
 * Countersign's send protocol (DESIGN.md "Send intent lifecycle"), for spin.
 *
 * One approved send intent, NW workers, the sweep, the provider (AgentMail's idempotency key),
 * the clock, and the people around it (an edit of the stored version, the approver losing the
 * right, cancel, undo inside the hold window, a person resolving needs_attention), with faults as
 * nondeterministic choices. model/README.md says how to run it; RELIABILITY.md "Model checking"
 * what it covers and what it abstracts away.
 *
 * Time: one clock unit is "about an hour" of the 24 h scale. WINDOW is the 23 h stop of automatic
 * retries (SEND_SAFE_WINDOW_SECONDS), KEYTTL the provider's 24 h memory of a completed key, SKEW
 * the clock disagreement the design allows (the one hour between 23 h and 24 h). Leases (60 s)
 * are far below one unit: a lease expires only when its worker crashes or pauses past it (a fault).
 *
 * Mutants (each removes one guard; the tests expect a counterexample):
 *   -DNO_FENCE       recording ignores the lease token (record.py lock_leased_for_record)
 *   -DNO_HASH_CHECK  the pre-call check skips the hash and recipients re-check (precheck.py)
 *   -DNO_RIGHT_CHECK the pre-call check skips the approver's right (precheck.py)
 *   -DNO_WINDOW      no 23 h stop (precheck.py _attempt_kind, record.py _record_not_processed):
 *                    the provider forgets the key while a worker still replays: a double send
 *   -DNO_SAME_KEY    reconciliation replays with a new key instead of the intent's one
 *   -DNO_GIVE_UP     failing label lookups are retried for ever (reconcile.py's 2 x max attempts):
 *                    the liveness property fails, an intent stays uncertain
 *   -DLATE_SEND_CHECK asserts that nothing is sent once the intent ended unsent (cancelled, failed,
 *                    blocked, expired): it does not hold, a request still in progress at the
 *                    provider completes after a person cancelled the needs_attention intent
 *   -DLONG_PAUSE     the environment may pause a worker for hours between its pre-call check and
 *                    its call (the assumption the 1 h margin rests on; see RELIABILITY.md)
 */

#ifndef NW
#define NW 2
#endif
#ifndef WINDOW
#define WINDOW 1
#endif
#ifndef KEYTTL
#define KEYTTL 2
#endif
#ifndef SKEW
#define SKEW 1
#endif
#ifndef MAXATT
#define MAXATT 2          /* SEND_MAX_ATTEMPTS */
#endif
#ifndef MAXFAULTS
#define MAXFAULTS 2       /* crashes and pauses past the lease, in one run */
#endif
#ifdef NO_GIVE_UP
#define ATTCAP (2 * MAXATT + 2)
#else
#define ATTCAP 255
#endif
#define HOLD 1            /* hold_until: the undo window ends at clock 1 */
#define NOTAFTER 2        /* not_after, for an intent that has one */
#ifndef MAXT
#define MAXT (WINDOW + KEYTTL + 1)
#endif

/* The intent's states: exactly SendIntent.State (tests/model/test_drift.py checks it). */
/* states: queued sending uncertain accepted needs_attention failed blocked expired cancelled */
mtype = { queued, sending, uncertain, accepted, needs_attention, failed, blocked, expired, cancelled };

/* provider answers, as the worker classifies them (record.py) */
#define A_NONE  0
#define A_OK    1   /* 2xx with a message id */
#define A_UNC   2   /* read timeout / lost answer, 5xx, 409 in progress: may have been processed */
#define A_RETRY 3   /* connection refused, 429: certainly not processed */
#define A_PERM  4   /* 4xx describing the request, 409/422 key used for a different request */
/* attempt kinds */
#define K_SEND   1
#define K_REPLAY 2
#define K_LOOKUP 3
/* provider key states */
#define UNSEEN 0
#define INPROG 1
#define DONE   2

/* ---- the database ---- */
mtype st = queued;
byte tok = 0;             /* lease_token: 0 none, w+1 for worker w's claim */
bool lexp = false;        /* the database clock is past lease_expires_at */
bool arow = false;        /* an attempt row is committed under the current lease */
byte attempts = 0;
bool has_fa = false;      /* first_attempt_at set */
byte fa = 0;
bool msgrec = false;      /* provider_message_id recorded */
bool has_hold = false;    /* approved with an undo window (hold_until) */
bool has_na = false;      /* has a not_after */
byte vhash = 1;           /* the stored version's hash; the approval covers 1 */
byte vrcpt = 1;           /* the stored version's recipients; the approval covers 1 */
bool right = true;        /* the approver still has the right on the mailbox */
byte now = 0;             /* the database clock */
byte wh = 0;              /* webhook for the message: 0 none, 1 stored (deferred), 2 applied */

/* ---- the provider: one idempotency key per intent (two only for NO_SAME_KEY) ---- */
byte kst[2];
byte kdone[2];            /* provider clock reading at completion */
byte kowner[2];           /* worker whose request is in progress */
bool kwait[2];            /* that worker is still waiting for the answer */
bool kok[2];              /* the request in progress carries exactly what was approved, checked
                             while the approver had the right */
byte ksends[2];           /* sends performed per key */
byte sends = 0;           /* sends performed for the intent */
byte ans[NW];             /* the answer a waiting worker will read */

/* ---- the environment ---- */
byte faults = 0;
byte inflight = 0;        /* workers between the pre-call check and the provider receiving */

#define leased (st == sending || st == uncertain)
#define done (st == accepted || st == failed || st == blocked || st == expired || st == cancelled || st == needs_attention)

inline drop_lease() {
  tok = 0; lexp = false
}

/* A fault at this step: nothing, a pause past the lease, or a crash (the process restarts with
   nothing in memory; its lease will expire). */
inline fault() {
  if
  :: true
  :: faults < MAXFAULTS ->
     atomic { faults++; if :: tok == w + 1 -> lexp = true :: else -> skip fi }
  :: faults < MAXFAULTS ->
     atomic {
       faults++;
       if :: tok == w + 1 -> lexp = true :: else -> skip fi;
       if :: flying -> inflight--; flying = false :: else -> skip fi;
       if :: kst[k] == INPROG && kowner[k] == w -> kwait[k] = false :: else -> skip fi;
     }
     goto idle
  fi
}

/* a worker process starts every claim with nothing in memory */
inline fresh() {
  k = 0; kind = 0; a = A_NONE; flying = false; okreq = false
}

proctype Worker(byte w) {
  byte k = 0;
  byte kind = 0;
  byte a = A_NONE;
  bool flying = false;
  bool okreq = false;
  byte j;
  bool found;
  bool window_passed;
  bool problem;

idle:
end_idle:
  /* claim.py: a due queued intent (past hold_until and before not_after), or an uncertain one
     whose lease is free; attempts + 1, first_attempt_at once; a new token */
  atomic {
    if
    :: st == queued && (!has_hold || now >= HOLD) && (!has_na || now < NOTAFTER) ->
       fresh();
       /* transition: queued -> sending */
       st = sending; tok = w + 1; lexp = false; arow = false;
       if :: attempts < ATTCAP -> attempts++ :: else -> skip fi;
       if :: !has_fa -> has_fa = true; fa = now :: else -> skip fi
    :: st == uncertain && tok == 0 ->
       fresh();
       tok = w + 1; lexp = false; arow = false;
       if :: attempts < ATTCAP -> attempts++ :: else -> skip fi
    fi
  }
  fault();

  /* precheck.py intent_begin_attempts: the fenced, live lease; the pre-call check; the attempt
     row, committed before any call. strict_now is the later of the database clock and ours. */
  atomic {
    if
    :: leased && tok == w + 1 && !lexp -> skip
    :: else -> goto idle        /* no longer ours: touch nothing */
    fi;
    j = 0;
    if :: j = 0 :: j = SKEW fi;  /* our clock may be ahead; behind changes nothing (max) */
#ifdef NO_WINDOW
    window_passed = false;
#else
    window_passed = has_fa && now + j - fa > WINDOW;
#endif
    problem = !right;
#ifdef NO_RIGHT_CHECK
    problem = false;
#endif
#ifndef NO_HASH_CHECK
    problem = problem || vhash != 1 || vrcpt != 1;
#endif
    if
    :: st == uncertain ->
       if
       :: problem || window_passed || attempts > MAXATT || (has_na && now + j >= NOTAFTER) ->
          kind = K_LOOKUP
       :: else -> kind = K_REPLAY
       fi
    :: else ->
       if
       :: (has_na && now + j >= NOTAFTER) || problem ->
          /* transition: sending -> blocked */
          st = blocked; drop_lease(); goto idle
       :: else ->
          if
          :: window_passed ->
             /* transition: sending -> failed */
             st = failed; drop_lease(); goto idle
          :: else -> kind = K_SEND
          fi
       fi
    fi;
    arow = true;
    okreq = vhash == 1 && vrcpt == 1 && right;
    if :: kind != K_LOOKUP -> inflight++; flying = true :: else -> skip fi;
    j = 0; window_passed = false; problem = false
  }
  fault();

  if
  :: kind == K_LOOKUP -> goto lookup
  :: else -> skip
  fi;

  /* worker.py _call: the send, outside any transaction, with the intent's key */
#ifdef NO_SAME_KEY
  if :: kind == K_REPLAY -> k = 1 :: else -> k = 0 fi;
#endif
  atomic {
    inflight--; flying = false;
    /* the provider forgets a completed key KEYTTL after it completed, by its own clock */
    j = 0;
    if :: j = 0 :: j = SKEW fi;
    if
    :: kst[k] == DONE && now + j > kdone[k] + KEYTTL -> kst[k] = UNSEEN
    :: else -> skip
    fi;
    if
    :: kst[k] == UNSEEN ->
       kst[k] = INPROG; kowner[k] = w; kwait[k] = true; kok[k] = okreq; ans[w] = A_NONE
    :: kst[k] == INPROG -> a = A_UNC              /* 409: in progress */
    :: kst[k] == DONE ->
       if
       :: okreq -> if :: a = A_OK :: a = A_UNC fi  /* the original result, or lost */
       :: else -> a = A_PERM                       /* key used for a different request */
       fi
    fi;
    j = 0
  }
  if
  :: a == A_NONE ->
     /* wait for the provider's answer (or crash while waiting) */
     if
     :: ans[w] != A_NONE -> a = ans[w]; ans[w] = A_NONE
     :: faults < MAXFAULTS ->
        atomic {
          faults++;
          if :: tok == w + 1 -> lexp = true :: else -> skip fi;
          if :: kst[k] == INPROG && kowner[k] == w -> kwait[k] = false :: else -> skip fi
        }
        goto idle
     fi
  :: else -> skip
  fi;
  fault();

  /* record.py: the answer is written only while the lease is ours */
  atomic {
#ifdef NO_FENCE
    if
    :: leased -> skip
    :: else -> goto idle
    fi;
#else
    if
    :: leased && tok == w + 1 -> skip
    :: else -> goto idle        /* fenced: the attempt row only */
    fi;
#endif
    assert(tok == w + 1);       /* a fenced worker never changes an intent it lost */
    if
    :: a == A_OK ->
       /* transition: sending -> accepted */
       /* transition: uncertain -> accepted */
       st = accepted; msgrec = true; drop_lease();
       if :: wh == 1 -> wh = 2 :: else -> skip fi  /* the deferred webhook applies now */
    :: a == A_UNC ->
       /* transition: sending -> uncertain */
       st = uncertain; drop_lease()
    :: a == A_RETRY && st == uncertain -> drop_lease()
    :: a == A_RETRY && st == sending ->
#ifdef NO_WINDOW
       if
       :: attempts >= MAXATT -> st = failed
#else
       if
       :: attempts >= MAXATT || now > fa + WINDOW -> st = failed
#endif
       /* transition: sending -> queued */
       :: else -> st = queued
       fi;
       drop_lease()
    :: a == A_PERM && st == uncertain ->
       /* transition: uncertain -> needs_attention */
       st = needs_attention; drop_lease()
    :: a == A_PERM && st == sending -> st = failed; drop_lease()
    fi
  }
  goto idle;

lookup:
  /* reconcile.py: list the inbox's messages by the intent's label (labels outlive keys) */
  atomic {
    if
    :: a = A_OK; found = (ksends[0] + ksends[1] > 0)
    :: a = A_UNC                 /* the lookup failed or its answer was lost */
    fi
  }
  fault();
  atomic {
    if
    :: leased && tok == w + 1 -> skip
    :: else -> goto idle
    fi;
    if
    :: a == A_OK && found -> st = accepted; msgrec = true; drop_lease();
       if :: wh == 1 -> wh = 2 :: else -> skip fi
    :: a == A_OK && !found -> st = needs_attention; drop_lease()
#ifdef NO_GIVE_UP
    :: a == A_UNC -> drop_lease()
#else
    :: a == A_UNC && attempts > 2 * MAXATT -> st = needs_attention; drop_lease()
    :: a == A_UNC && attempts <= 2 * MAXATT -> drop_lease()   /* uncertain, later again */
#endif
    fi;
    found = false
  }
  goto idle
}

/* The provider completes a request in progress: processed or not, then an answer, perhaps lost. */
active proctype Provider() {
  byte k;
  byte r;
end:
  do
  :: atomic {
       (kst[0] == INPROG || kst[1] == INPROG) ->
       if :: kst[0] == INPROG -> k = 0 :: else -> k = 1 fi;
       if
       :: /* processed: the send happens */
          assert(kok[k]);          /* exactly the approved version and recipients, and the
                                      approver still had the right at the check */
#ifdef LATE_SEND_CHECK
          /* a known limit, asserted on purpose: no send once the intent ended without one */
          assert(st != cancelled && st != failed && st != blocked && st != expired);
#endif
          sends++; ksends[k]++;
          assert(ksends[k] <= 1);  /* at most one send per key */
          assert(sends <= 1);      /* at most one send per intent */
          kst[k] = DONE;
          if :: kdone[k] = now :: kdone[k] = now + SKEW fi;
          if
          :: r = A_OK
          :: r = A_UNC             /* timeout after acceptance, or 5xx after processing */
          fi
       :: /* not processed */
          kst[k] = UNSEEN;
          if
          :: r = A_RETRY           /* connection refused, 429 */
          :: r = A_UNC             /* 5xx before processing, timeout */
          :: r = A_PERM            /* 4xx describing the request */
          fi
       fi;
       if :: kwait[k] -> ans[kowner[k]] = r; kwait[k] = false :: else -> skip fi
     }
  od
}

/* sweep.py intents_release_expired_leases */
active proctype Sweep() {
end:
  do
  :: atomic {
       leased && tok != 0 && lexp ->
       if
       :: st == uncertain -> skip
       :: st == sending && arow -> skip    /* transition: sending -> uncertain */
          st = uncertain
       :: st == sending && !arow ->        /* transition: sending -> queued */
          st = queued
       fi;
       drop_lease()
     }
  :: atomic {
       /* intents_expire_not_after */
       st == queued && has_na && now >= NOTAFTER ->
       /* transition: queued -> expired */
       st = expired
     }
  od
}

/* The clock: hours pass, but not while a checked request is on its way to the provider or in
   progress there (calls take seconds; LONG_PAUSE drops this assumption). */
active proctype Clock() {
end:
  do
#ifdef LONG_PAUSE
  :: atomic { now < MAXT -> now++ }
#else
  :: atomic { now < MAXT && inflight == 0 && kst[0] != INPROG && kst[1] != INPROG -> now++ }
#endif
  od
}

/* The people and the webhook, in any order, at any time, or never. Each action is enabled only
   while it can change something, so no flags are needed. */
active proctype People() {
end:
  do
  :: atomic {
       vhash == 1 && vrcpt == 1 ->
       if :: vhash = 2 :: vrcpt = 2 fi   /* the stored version no longer matches the approval */
     }
  :: right -> right = false              /* the approver loses the right on the mailbox */
  :: atomic {
       /* services/intents.py intent_cancel */
       st == queued ->                   /* transition: queued -> cancelled */
       st = cancelled
     }
  :: atomic {
       st == needs_attention ->          /* transition: needs_attention -> cancelled */
       st = cancelled
     }
  :: atomic {
       /* services/undo.py intent_undo: inside the window, never attempted */
       st == queued && has_hold && attempts == 0 && now < HOLD -> st = cancelled
     }
  :: atomic {
       /* services/intents.py intent_resolve_accepted: a person, with the evidence of the send */
       st == needs_attention && sends > 0 ->
       /* transition: needs_attention -> accepted */
       st = accepted; msgrec = true;
       if :: wh == 1 -> wh = 2 :: else -> skip fi
     }
  :: atomic {
       /* the provider's webhook for the sent message, perhaps before the worker records */
       sends > 0 && wh == 0 ->
       if :: msgrec -> wh = 2 :: else -> wh = 1 fi   /* applied, or kept until recorded */
     }
  od
}

init {
  byte i;
  atomic {
    /* services/approval.py draft_approve: the approver, with the right, approves version 1:
       one intent, one key for life; with or without an undo window and a not_after */
#ifndef SMALL
    if :: has_hold = true :: has_hold = false fi;
    if :: has_na = true :: has_na = false fi;
#endif
    st = queued;
    i = 0;
    do
    :: i < NW -> run Worker(i); i++
    :: else -> break
    od
  }
}

/* Liveness under weak fairness (pan -a -f): every run ends terminal or in needs_attention. */
ltl live { <> [] done }
