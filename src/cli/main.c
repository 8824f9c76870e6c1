/* SPDX-License-Identifier: MIT */
/*
 * fragsim: the program.  Everything but this file lives in libraries (fsimcore, fsimcli) so that
 * tests drive the same code.
 */
#include <glib.h>

#include <locale.h>

#include "cli.h"

int
main(int argc, char **argv)
{
    /* Numbers and JSON stay in the C locale; only messages would be translated. */
    setlocale(LC_ALL, "");
    setlocale(LC_NUMERIC, "C");
    return fsim_cli_main(argc, argv);
}
