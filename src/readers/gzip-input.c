/* SPDX-License-Identifier: MIT */
/*
 * The gzip decompressor behind every compressed input (fsim_input_open()).
 *
 * Where fragsim is built with ISA-L (libisal, FSIM_HAVE_ISAL), a GConverter around its
 * isal_inflate(): on the inputs that cost nothing to interpret (a log of blank rows, a trace of
 * comments) zlib's inflate is the whole cost of reading, about 110 MB/s on long runs of one byte,
 * where ISA-L decompresses the same stream at several GB/s.  Otherwise zlib's inflate, as GIO's
 * GZlibDecompressor does it (src/readers/gzip-zlib.c).  Both read one gzip member, check its CRC-32
 * and length, and fail the same way: G_IO_ERROR_INVALID_DATA on corrupt data and
 * G_IO_ERROR_PARTIAL_INPUT when the input ends inside the member.
 */
#include <gio/gio.h>

#include "readers/readers.h"

#ifdef FSIM_HAVE_ISAL

#include <isa-l/igzip_lib.h>

#define FSIM_TYPE_ISAL_DECOMPRESSOR (fsim_isal_decompressor_get_type())
G_DECLARE_FINAL_TYPE(FsimIsalDecompressor, fsim_isal_decompressor, FSIM, ISAL_DECOMPRESSOR, GObject)

struct _FsimIsalDecompressor {
    GObject parent;
    struct inflate_state *state;
};

static void fsim_isal_decompressor_iface_init(GConverterIface *iface);

G_DEFINE_TYPE_WITH_CODE(FsimIsalDecompressor, fsim_isal_decompressor, G_TYPE_OBJECT,
                        G_IMPLEMENT_INTERFACE(G_TYPE_CONVERTER, fsim_isal_decompressor_iface_init))

static void
isal_state_start(struct inflate_state *state)
{
    isal_inflate_init(state);
    state->crc_flag = ISAL_GZIP; /* parse the header, check the CRC-32 and length trailer */
}

static void
fsim_isal_decompressor_init(FsimIsalDecompressor *self)
{
    self->state = g_new0(struct inflate_state, 1);
    isal_state_start(self->state);
}

static void
fsim_isal_decompressor_finalize(GObject *object)
{
    FsimIsalDecompressor *self = FSIM_ISAL_DECOMPRESSOR(object);

    g_free(self->state);
    G_OBJECT_CLASS(fsim_isal_decompressor_parent_class)->finalize(object);
}

static void
fsim_isal_decompressor_class_init(FsimIsalDecompressorClass *klass)
{
    G_OBJECT_CLASS(klass)->finalize = fsim_isal_decompressor_finalize;
}

static GConverterResult
isal_convert(GConverter *converter, const void *inbuf, gsize inbuf_size, void *outbuf,
             gsize outbuf_size, GConverterFlags flags, gsize *bytes_read, gsize *bytes_written,
             GError **error)
{
    struct inflate_state *state = FSIM_ISAL_DECOMPRESSOR(converter)->state;
    int ret;

    /* isal_inflate() counts in 32 bits; the converter input stream is called again for more. */
    state->next_in = (uint8_t *)(guintptr)inbuf;
    state->avail_in = (uint32_t)MIN(inbuf_size, G_MAXUINT32);
    state->next_out = outbuf;
    state->avail_out = (uint32_t)MIN(outbuf_size, G_MAXUINT32);
    ret = isal_inflate(state);
    if (ret < 0 || ret == ISAL_NEED_DICT) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "invalid gzip data (%s)",
                    ret == ISAL_INCORRECT_CHECKSUM
                        ? "its trailer's checksum or length does not match"
                    : ret == ISAL_INVALID_WRAPPER || ret == ISAL_UNSUPPORTED_METHOD
                        ? "bad gzip header"
                        : "corrupt compressed data");
        return G_CONVERTER_ERROR;
    }
    *bytes_read = inbuf_size - state->avail_in;
    *bytes_written = outbuf_size - state->avail_out;
    if (state->block_state == ISAL_BLOCK_FINISH)
        return G_CONVERTER_FINISHED;
    if (*bytes_read == 0 && *bytes_written == 0) {
        if (flags & G_CONVERTER_FLUSH)
            return G_CONVERTER_FLUSHED;
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT,
                            "the gzip data ends early (a truncated file?)");
        return G_CONVERTER_ERROR;
    }
    return G_CONVERTER_CONVERTED;
}

static void
isal_reset(GConverter *converter)
{
    isal_state_start(FSIM_ISAL_DECOMPRESSOR(converter)->state);
}

static void
fsim_isal_decompressor_iface_init(GConverterIface *iface)
{
    iface->convert = isal_convert;
    iface->reset = isal_reset;
}

GConverter *
fsim_gzip_decompressor_new(void)
{
    return G_CONVERTER(g_object_new(FSIM_TYPE_ISAL_DECOMPRESSOR, NULL));
}

#else

GConverter *
fsim_gzip_decompressor_new(void)
{
    return fsim_zlib_gzip_decompressor_new();
}

#endif
