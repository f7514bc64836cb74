// TYPE-CHECK-ONLY STUB, not the Android API: see android-app/compile-stubs/README.md.
package android.content;

import android.net.Uri;
import java.io.FileNotFoundException;
import java.io.InputStream;

public abstract class ContentResolver {
    public final InputStream openInputStream(Uri uri) throws FileNotFoundException {
        throw new RuntimeException("stub");
    }
}
