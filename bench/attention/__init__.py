"""The attention benchmark: model turns spent per claim over a scripted day of traffic,
replayed with the real Claude Code.

* `day.py` writes the day from a seed: sessions of four projects starting, ending,
  resuming, going quiet and declaring focus; errands, answers, facts, lookups a policy
  serves, a deny and a gate; two sessions editing one file under a claim. Every entry
  carries its ground truth: the sessions that truly need a turn for it.
* `replay.py` plays it against a real store with real Claude Code sessions (the plugin's
  monitor and hooks, under tmux), each talking to a stand-in model that records every
  request, in one of the configurations.
* `score.py` attributes each recorded request to the telling that caused it (a Monitor
  line, a Stop block, the SessionStart context, a `wait` result) and scores the tellings
  against the ground truth.
* `judge.py` is the stub triage judge: it answers from the labels, optionally wrong.

    python -m bench.attention [--quick] [--json PATH] [--write]
"""
