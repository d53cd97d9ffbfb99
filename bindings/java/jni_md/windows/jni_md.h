/* The platform part of jni.h for Windows x64, for cross builds of the JNI
 * glue with mingw-w64 (bindings/cross_natives.cmake): Debian's JDK ships
 * only Linux's. Written from the JNI specification's types: jint is 32
 * bits, jlong 64, jbyte signed; exports are dllexport, calls __stdcall
 * (the one x64 calling convention). */
#ifndef VKATTN_JNI_MD_WINDOWS_H
#define VKATTN_JNI_MD_WINDOWS_H

#define JNIEXPORT __declspec(dllexport)
#define JNIIMPORT __declspec(dllimport)
#define JNICALL __stdcall

typedef int jint;
typedef long long jlong;
typedef signed char jbyte;

#endif
