// The owner of the precompiled headers that the project's executables reuse (core/CMakeLists.txt); it does nothing.
int main() { return 0; }
