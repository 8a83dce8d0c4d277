"""A stand-in for Raven (EverMind-AI/Raven 0.1.9), used by the contract tests when no Raven
source is at hand (`RAVEN_SRC` unset). Our own minimal code: only the names, signatures and
behaviours Raven's host code applies to a plugin, each pinned by file and line in the tests that
use it. Not Raven."""
