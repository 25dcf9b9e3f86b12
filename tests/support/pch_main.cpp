int main() { return 0; }  // only compiles the tests' shared precompiled header
