/* kvcal_main.c — the kvcal command line. */
#include <stdio.h>
#include <string.h>

#include "util.h"

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        printf("usage: kvcal COMMAND ...\n");
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "kvcal: unknown command '%s'\n", argv[1]);
    return 2;
}
