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
    /* Numbers, dates and JSON stay in the C locale: only the character set and messages follow
     * the user's.  (Loading every category of a locale costs a dozen files at each start.) */
    setlocale(LC_CTYPE, "");
    setlocale(LC_MESSAGES, "");
    return fsim_cli_main(argc, argv);
}
