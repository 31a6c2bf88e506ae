/* Preloaded (LD_PRELOAD) into every process of scripts/test.sh's AddressSanitizer stage:
 * dlclose() does nothing, so the shared objects Open MPI and PMIx load as components stay
 * mapped until the process exits. LeakSanitizer checks for leaks at exit; by then
 * MPI_Finalize has unloaded the components, and the allocations they made (process-wide
 * state Open MPI never frees, see lsan.supp) had stacks of "<unknown module>" frames that
 * no suppression could name. Debian's Open MPI 4.1.4 has no parameter to keep them loaded
 * (ompi_info lists no *_disable_dlclose). Unloading nothing changes no result: a library
 * is only ever unloaded at the end of its use. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
