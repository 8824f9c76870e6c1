/* SPDX-License-Identifier: MIT */
/*
 * zlib's gzip as GConverters: the compressor of written .gz traces, and the decompressor of
 * compressed inputs where fragsim is built without ISA-L.  They do what GIO's GZlibCompressor and
 * GZlibDecompressor do for the gzip format (the same deflate parameters, so the same bytes, and
 * the same messages), without their GFileInfo header support: that pulls GIO's virtual file
 * systems, D-Bus and libmount into a statically linked fragsim (docs/performance.md, Start-up).
 */
#include <glib.h>

#include <gio/gio.h>
#include <zlib.h>

#include "readers/readers.h"

#define FSIM_TYPE_ZLIB_CONVERTER (fsim_zlib_converter_get_type())
G_DECLARE_FINAL_TYPE(FsimZlibConverter, fsim_zlib_converter, FSIM, ZLIB_CONVERTER, GObject)

struct _FsimZlibConverter {
    GObject parent;
    z_stream zstream;
    gboolean compress;
};

static void fsim_zlib_converter_iface_init(GConverterIface *iface);

G_DEFINE_TYPE_WITH_CODE(FsimZlibConverter, fsim_zlib_converter, G_TYPE_OBJECT,
                        G_IMPLEMENT_INTERFACE(G_TYPE_CONVERTER, fsim_zlib_converter_iface_init))

static void
fsim_zlib_converter_init(FsimZlibConverter *self)
{
    (void)self;
}

/* @on_deflate on the stream of a compressor, @on_inflate on that of a decompressor (deflateEnd()
 * and inflateEnd(), deflateReset() and inflateReset()). */
static void
zlib_stream_call(FsimZlibConverter *self, int (*on_deflate)(z_streamp),
                 int (*on_inflate)(z_streamp))
{
    (self->compress ? on_deflate : on_inflate)(&self->zstream);
}

static void
fsim_zlib_converter_finalize(GObject *object)
{
    zlib_stream_call(FSIM_ZLIB_CONVERTER(object), deflateEnd, inflateEnd);
    G_OBJECT_CLASS(fsim_zlib_converter_parent_class)->finalize(object);
}

static void
fsim_zlib_converter_class_init(FsimZlibConverterClass *klass)
{
    G_OBJECT_CLASS(klass)->finalize = fsim_zlib_converter_finalize;
}

/* zlib's failures as GIO's converters word them. */
static gboolean
zlib_failed(FsimZlibConverter *self, int res, GConverterFlags flags, GConverterResult *result,
            GError **error)
{
    switch (res) {
    case Z_DATA_ERROR:
    case Z_NEED_DICT:
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "Invalid compressed data");
        break;
    case Z_MEM_ERROR:
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "Not enough memory");
        break;
    case Z_STREAM_ERROR:
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "Internal error: %s",
                    self->zstream.msg != NULL ? self->zstream.msg : "");
        break;
    case Z_BUF_ERROR:
        if (flags & G_CONVERTER_FLUSH) {
            *result = G_CONVERTER_FLUSHED;
            return TRUE;
        }
        /* there is room for output, so this only happens without input when more is needed */
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_PARTIAL_INPUT, "Need more input");
        break;
    default:
        return FALSE;
    }
    *result = G_CONVERTER_ERROR;
    return TRUE;
}

static GConverterResult
zlib_convert(GConverter *converter, const void *inbuf, gsize inbuf_size, void *outbuf,
             gsize outbuf_size, GConverterFlags flags, gsize *bytes_read, gsize *bytes_written,
             GError **error)
{
    FsimZlibConverter *self = FSIM_ZLIB_CONVERTER(converter);
    GConverterResult result;
    int res;

    self->zstream.next_in = (Bytef *)(guintptr)inbuf;
    self->zstream.avail_in = (uInt)inbuf_size;
    self->zstream.next_out = outbuf;
    self->zstream.avail_out = (uInt)outbuf_size;
    if (self->compress)
        res = deflate(&self->zstream, (flags & G_CONVERTER_INPUT_AT_END) ? Z_FINISH
                                      : (flags & G_CONVERTER_FLUSH)      ? Z_SYNC_FLUSH
                                                                         : Z_NO_FLUSH);
    else
        res = inflate(&self->zstream, Z_NO_FLUSH);
    if (zlib_failed(self, res, flags, &result, error))
        return result;
    *bytes_read = inbuf_size - self->zstream.avail_in;
    *bytes_written = outbuf_size - self->zstream.avail_out;
    return res == Z_STREAM_END ? G_CONVERTER_FINISHED : G_CONVERTER_CONVERTED;
}

static void
zlib_reset(GConverter *converter)
{
    zlib_stream_call(FSIM_ZLIB_CONVERTER(converter), deflateReset, inflateReset);
}

static void
fsim_zlib_converter_iface_init(GConverterIface *iface)
{
    iface->convert = zlib_convert;
    iface->reset = zlib_reset;
}

GConverter *
fsim_gzip_compressor_new(int level)
{
    FsimZlibConverter *self = g_object_new(FSIM_TYPE_ZLIB_CONVERTER, NULL);
    int res;

    self->compress = TRUE;
    res = deflateInit2(&self->zstream, level, Z_DEFLATED, MAX_WBITS + 16, 8, Z_DEFAULT_STRATEGY);
    if (res == Z_MEM_ERROR)
        g_error("GZlibCompressor: Not enough memory for zlib use");
    return G_CONVERTER(self);
}

GConverter *
fsim_zlib_gzip_decompressor_new(void)
{
    FsimZlibConverter *self = g_object_new(FSIM_TYPE_ZLIB_CONVERTER, NULL);
    int res;

    res = inflateInit2(&self->zstream, MAX_WBITS + 16);
    if (res == Z_MEM_ERROR)
        g_error("GZlibDecompressor: Not enough memory for zlib use");
    return G_CONVERTER(self);
}
