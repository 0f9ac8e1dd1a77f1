// Preloaded into the sanitized tests and programs (LD_PRELOAD, scripts/common.sh's sanitizer_env): dlclose does
// nothing, so that the plugins Open MPI opens in MPI_Init stay loaded until exit. LeakSanitizer then names their
// allocations by module (scripts/lsan.supp suppresses them) with AddressSanitizer's default fast unwinder, instead of
// the slow unwinder that seeing past an unloaded plugin to MPI_Init takes (every allocation of every test, 3 to 5
// times slower).
extern "C" int dlclose(void* /*handle*/) { return 0; }
